import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { EdgeLimits } from "../../config/config.js";
import type { Credential, HeaderCheck, Readiness } from "../../core/index.js";
import {
  admitHeaders, BODY_MEMORY_RETRY_AFTER_SECONDS, BodyAdmission, type BodyRefusal, UPLOAD_RETRY_AFTER_SECONDS,
} from "../admission.js";
import type { BodyBudget, UploadSlots } from "../upload-slots.js";
import { credentialsOf } from "./credentials.js";
import type { MethodPolicy } from "./method-policy.js";
import { bodyMemoryFull, edgeFailure, invalidMessageFlags, messageTooLarge, notServing, requestTimedOut, tooManyUploads } from "./refusals.js";
import { envelopeFlagsAllowed, isEnveloped, messageEncodingHeader, protocolOf, type WireProtocol } from "./wire-protocol.js";

const ENVELOPE_HEADER_BYTES = 5;

const CLIENT_WENT_AWAY = new ConnectError("the client closed the request", Code.Canceled);

export interface RpcAdmissionSettings {
  readonly readiness: Readiness;
  readonly headerCheck: HeaderCheck;
  readonly edge: EdgeLimits;
  readonly uploadSlots: Pick<UploadSlots, "tryTake">;
  readonly bodyBudget: Pick<BodyBudget, "open">;
}

/** What differs between the two wires an RPC arrives on (HTTP/1.1 on the gateway port, HTTP/2 on the core port). */
export interface WireHooks {
  /** The client a call counts against (failed credentials): its connection's, or the one its gateway signed for. */
  callerOf(request: FastifyRequest): string | undefined;
  /** The rest of a body nobody reads any more (a refusal, an early end): discarded within bounds, or its stream closed. */
  abandonBody(request: FastifyRequest, reply: FastifyReply): void;
  /** HTTP_REQUEST_TIMEOUT when the server does not enforce it itself (HTTP/2): the message must have arrived within it. */
  readonly requestTimeoutMs?: number;
  /** The answer is ready: the wire's idle clock, paused while the service worked, runs again. */
  answering?(request: FastifyRequest): void;
}

/** One value of a request header (Node gives a list for a repeated one: the first counts). */
export const headerValue = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/**
 * Reads the 5-byte length prefixes of a stream of enveloped messages (gRPC,
 * gRPC-Web, Connect streaming) as its chunks pass: `onMessage` hears each
 * message's size and flags before a byte of it (it may throw to refuse it), `onDone` its end.
 */
export class EnvelopeSizes {
  private readonly header = Buffer.alloc(ENVELOPE_HEADER_BYTES);
  private headerFilled = 0;
  private payloadLeft = 0;

  constructor(
    private readonly onMessage: (size: number, flags: number) => void,
    private readonly onDone: () => void,
  ) {}

  feed(chunk: Uint8Array): void {
    let offset = 0;
    while (offset < chunk.byteLength) {
      if (this.payloadLeft > 0) {
        const take = Math.min(this.payloadLeft, chunk.byteLength - offset);
        this.payloadLeft -= take;
        offset += take;
        if (this.payloadLeft === 0) this.onDone();
        continue;
      }
      const take = Math.min(ENVELOPE_HEADER_BYTES - this.headerFilled, chunk.byteLength - offset);
      this.header.set(chunk.subarray(offset, offset + take), this.headerFilled);
      this.headerFilled += take;
      offset += take;
      if (this.headerFilled === ENVELOPE_HEADER_BYTES) {
        this.payloadLeft = this.header.readUInt32BE(1);
        this.headerFilled = 0;
        this.onMessage(this.payloadLeft, this.header[0]!);
        if (this.payloadLeft === 0) this.onDone();
      }
    }
  }
}

/**
 * The request body pulled chunk by chunk in paused mode: nothing is read
 * that is not asked for (HTTP/2's flow control then holds the sender back),
 * and `detach` leaves the rest unread, to be discarded.
 */
class PulledBody {
  private failure: unknown;
  private wake: (() => void) | undefined;

  constructor(private readonly incoming: Readable) {
    incoming.on("readable", this.poke);
    incoming.on("end", this.poke);
    incoming.on("error", this.fail);
    incoming.on("close", this.closed);
  }

  private readonly poke = () => {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  };

  readonly fail = (error: unknown) => {
    this.failure ??= error;
    this.poke();
  };

  private readonly closed = () => {
    if (!this.incoming.readableEnded) this.fail(CLIENT_WENT_AWAY);
  };

  detach(): void {
    this.incoming.off("readable", this.poke);
    this.incoming.off("end", this.poke);
    this.incoming.off("error", this.fail);
    this.incoming.off("close", this.closed);
  }

  async read(): Promise<Buffer | undefined> {
    for (;;) {
      if (this.failure !== undefined) throw this.failure;
      const chunk = this.incoming.read() as Buffer | null;
      if (chunk !== null) return chunk;
      if (this.incoming.readableEnded) return undefined;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}

/**
 * What the headers alone refuse a call for, checked before its message is
 * read (admitHeaders): the process cannot serve (UNAVAILABLE), or the
 * method's credential is missing or wrong.
 */
export async function headerRefusal(
  policy: Pick<MethodPolicy, "credential" | "servedWhileNotReady" | "method">,
  settings: Pick<RpcAdmissionSettings, "readiness" | "headerCheck">,
  headers: Headers,
  client: string | undefined,
  log: (message: string, error: unknown) => void,
): Promise<ConnectError | undefined> {
  const admission = { credential: policy.credential as Credential | undefined, servedWhileNotReady: policy.servedWhileNotReady };
  const refusal = await admitHeaders(admission, settings, headers, client);
  if (refusal === undefined) return undefined;
  if (refusal.refused === "not_serving") return notServing(settings.readiness);
  if (refusal.error instanceof ConnectError) return refusal.error;
  log(`${policy.method.name}: credential check failed`, refusal.error);
  return edgeFailure(refusal.error);
}

/**
 * One RPC seen from its edge, on either port. From the headers alone, before
 * a byte of the body is read: readiness, the credential its method needs,
 * and the announced size (the method's limit, then an upload slot for a large
 * body, then its bytes from MAX_BODY_MEMORY). Then, as the body arrives, each
 * enveloped message by its length prefix before a byte of it is buffered
 * (its flags, the method's limit, a slot, its memory), and an unenveloped
 * one piece by piece; and the request timeout where the server has none.
 * What a call holds goes back once its body has been read whole, or the call
 * ended, never for as long as the answer takes; a client stream
 * (reflection's) gives back each message's as soon as it has arrived. A
 * refusal is thrown from the body, so Connect answers it in the caller's
 * protocol (gRPC status, gRPC-Web trailer, Connect JSON).
 */
export class RpcAdmission {
  readonly protocol: WireProtocol | undefined;
  private readonly held: BodyAdmission;
  private reader: PulledBody | undefined;
  /** The body's size as its Content-Length announced it (its memory then taken whole, before it is read). */
  private readonly announced: number | undefined;
  private timedOut = false;
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly request: FastifyRequest,
    private readonly reply: FastifyReply,
    readonly policy: MethodPolicy,
    private readonly settings: RpcAdmissionSettings,
    private readonly hooks: WireHooks,
    private readonly log: (message: string, error: unknown) => void,
  ) {
    this.protocol = protocolOf(request.headers["content-type"]);
    this.held = new BodyAdmission(settings, policy.maxMessageBytes);
    const length = Number(request.headers["content-length"] ?? NaN);
    this.announced = Number.isSafeInteger(length) ? length : undefined;
    if (hooks.requestTimeoutMs !== undefined) {
      this.timer = setTimeout(() => this.expire(), hooks.requestTimeoutMs);
      request.raw.once("end", () => clearTimeout(this.timer));
    }
    // The call is over (answered, or its client gone): whatever it holds goes back, and a body nobody reads any
    // more (Connect stopped early) is abandoned.
    reply.raw.once("close", () => {
      clearTimeout(this.timer);
      this.reader?.detach();
      this.release();
      if (!request.raw.readableEnded) hooks.abandonBody(request, reply);
    });
  }

  private get methodName() {
    return `${this.policy.service.typeName}/${this.policy.method.name}`;
  }

  /** Whether the method takes a stream of request messages (rather than exactly one). */
  private get clientStreams(): boolean {
    const kind = this.policy.method.methodKind;
    return kind === "client_streaming" || kind === "bidi_streaming";
  }

  /** The client the call counts against. */
  get client(): string | undefined {
    return this.hooks.callerOf(this.request);
  }

  /** The refusal owed before any byte of the body is read, if any. */
  async refusalBeforeBody(): Promise<ConnectError | undefined> {
    const refusal = await headerRefusal(this.policy, this.settings, credentialsOf(this.request.headers), this.client, this.log);
    if (refusal) return refusal;
    if (this.timedOut) return requestTimedOut(this.hooks.requestTimeoutMs!);
    if (this.announced === undefined || this.clientStreams) return undefined;
    const envelope = isEnveloped(this.protocol) ? ENVELOPE_HEADER_BYTES : 0;
    if (this.announced > this.policy.maxMessageBytes + envelope) {
      return messageTooLarge(this.methodName, this.policy.maxMessageBytes, this.announced - envelope);
    }
    return this.hold(this.announced, this.announced);
  }

  /** A message of `size` bytes that takes `memory` more bytes of body memory (BodyAdmission.hold), refused as a ConnectError. */
  private hold(size: number, memory: number): ConnectError | undefined {
    const refusal = this.held.hold(size, memory);
    return refusal && this.refusalOf(refusal);
  }

  private refusalOf(refusal: BodyRefusal): ConnectError {
    if (refusal.kind === "too_large") return messageTooLarge(this.methodName, refusal.limit, refusal.size);
    if (refusal.kind === "too_many_uploads") return tooManyUploads(UPLOAD_RETRY_AFTER_SECONDS);
    return bodyMemoryFull(BODY_MEMORY_RETRY_AFTER_SECONDS);
  }

  private release(): void {
    this.held.release();
  }

  /** The answer is ready (a unary call's message, a stream's start). */
  answering(): void {
    this.hooks.answering?.(this.request);
  }

  /**
   * The body Connect reads: the request's pieces as they arrive, each one
   * admitted first; a refusal is thrown from the body and the rest of what
   * the client sends abandoned.
   */
  async *body(): AsyncGenerator<Uint8Array> {
    if (this.timedOut) throw requestTimedOut(this.hooks.requestTimeoutMs!);
    const reader = (this.reader = new PulledBody(this.request.raw));
    const sized = this.announced !== undefined && !this.clientStreams;
    const encoding = headerValue(this.request.headers[messageEncodingHeader(this.protocol)]);
    const envelopes = new EnvelopeSizes((size, flags) => {
      if (!envelopeFlagsAllowed(flags, encoding)) throw invalidMessageFlags(flags, encoding);
      this.admit(size, sized ? 0 : size);
    }, () => {
      // Each of a client stream's messages gives back what it held once it has arrived whole.
      if (this.clientStreams) this.release();
    });
    let total = 0;
    try {
      for (let chunk = await reader.read(); chunk !== undefined; chunk = await reader.read()) {
        if (isEnveloped(this.protocol)) envelopes.feed(chunk);
        else {
          total += chunk.byteLength;
          this.admit(total, sized ? 0 : chunk.byteLength);
        }
        yield chunk;
      }
    } catch (error) {
      reader.detach();
      this.hooks.abandonBody(this.request, this.reply);
      throw error;
    } finally {
      reader.detach();
      this.release();
    }
  }

  private admit(size: number, memory: number): void {
    const refusal = this.hold(size, memory);
    if (refusal) throw refusal;
  }

  /** HTTP_REQUEST_TIMEOUT: a request still arriving is refused (or, already answered, abandoned). */
  private expire(): void {
    if (this.request.raw.readableEnded) return;
    this.timedOut = true;
    this.reader?.fail(requestTimedOut(this.hooks.requestTimeoutMs!));
    if (this.reply.raw.writableEnded) this.hooks.abandonBody(this.request, this.reply);
  }
}
