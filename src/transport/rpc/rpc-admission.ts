import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { EdgeLimits } from "../../config/config.js";
import type { HeaderCheck, Readiness } from "../../core/index.js";
import {
  type AdmissionLimits, admitHeaders, BODY_MEMORY_RETRY_AFTER_SECONDS, BodyAdmission, type BodyRefusal, UPLOAD_RETRY_AFTER_SECONDS,
} from "../admission.js";
import { credentialsOf } from "./credentials.js";
import type { MethodPolicy } from "./method-policy.js";
import { bodyMemoryFull, edgeFailure, invalidMessageFlags, messageTooLarge, notServing, requestTimedOut, tooManyUploads } from "./refusals.js";

/** The protocols the core port speaks, told apart by the request's content type (as Connect's handlers do). */
export type WireProtocol = "grpc" | "grpc-web" | "connect-unary" | "connect-stream";

// Each protocol's content types as its spec names them (Connect's own patterns are marked internal).
const JSON_OR_PROTO = String.raw`(?:json(?:; ?charset=utf-?8)?|proto)`;
const CONTENT_TYPES: readonly (readonly [WireProtocol, RegExp])[] = [
  ["grpc", new RegExp(String.raw`^application/grpc(?:\+${JSON_OR_PROTO})?$`, "i")],
  ["grpc-web", new RegExp(String.raw`^application/grpc-web(?:-text)?(?:\+${JSON_OR_PROTO})?$`, "i")],
  ["connect-unary", new RegExp(`^application/${JSON_OR_PROTO}$`, "i")],
  ["connect-stream", new RegExp(String.raw`^application/connect\+?${JSON_OR_PROTO}$`, "i")],
];

export const protocolOf = (contentType: string | undefined): WireProtocol | undefined =>
  contentType === undefined ? undefined : CONTENT_TYPES.find(([, pattern]) => pattern.test(contentType))?.[0];

const ENVELOPE_HEADER_BYTES = 5;

const CLIENT_WENT_AWAY = new ConnectError("the client closed the request", Code.Canceled);

export interface RpcAdmissionSettings extends AdmissionLimits {
  readonly readiness: Readiness;
  readonly headerCheck: HeaderCheck;
  readonly edge: EdgeLimits;
}

/** What differs between the two wires an RPC arrives on (HTTP/1.1 on the gateway port, HTTP/2 on the core port). */
export interface WireHooks {
  /** The client a call counts against (failed credentials): its connection's, or the one its gateway signed for. */
  callerOf(request: FastifyRequest): string | undefined;
  /** The rest of a body nobody reads any more (a refusal, an early end): discarded within bounds, or its stream closed. */
  abandonBody(request: FastifyRequest, reply: FastifyReply): void;
  /** HTTP_REQUEST_TIMEOUT when the server does not enforce it itself (HTTP/2). */
  readonly requestTimeoutMs?: number;
  /** The answer is ready: the wire's idle clock, paused while the service worked, runs again. */
  answering?(request: FastifyRequest): void;
}

/** Reads the length prefixes of enveloped messages as chunks pass: `onMessage` (which may throw) before a byte of each, `onDone` after it. */
class EnvelopeSizes {
  private readonly header = Buffer.alloc(ENVELOPE_HEADER_BYTES);
  private headerFilled = 0;
  private payloadLeft = 0;

  constructor(
    private readonly onMessage: (size: number, flags: number) => void,
    private readonly onDone: () => void,
  ) {}

  feed(chunk: Uint8Array): void {
    for (let offset = 0; offset < chunk.byteLength;) {
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
      if (this.headerFilled < ENVELOPE_HEADER_BYTES) continue;
      this.payloadLeft = this.header.readUInt32BE(1);
      this.headerFilled = 0;
      this.onMessage(this.payloadLeft, this.header[0]!);
      if (this.payloadLeft === 0) this.onDone();
    }
  }
}

/** The body pulled in paused mode: nothing is read unasked (HTTP/2 flow control holds the sender back); `detach` leaves the rest unread. */
class PulledBody {
  private failure: unknown;
  private wake: (() => void) | undefined;

  constructor(private readonly incoming: Readable) {
    incoming.on("readable", this.poke).on("end", this.poke).on("error", this.fail).on("close", this.closed);
  }

  private readonly poke = () => this.wake?.();

  readonly fail = (error: unknown) => {
    this.failure ??= error;
    this.poke();
  };

  private readonly closed = () => {
    if (!this.incoming.readableEnded) this.fail(CLIENT_WENT_AWAY);
  };

  detach(): void {
    this.incoming.off("readable", this.poke).off("end", this.poke).off("error", this.fail).off("close", this.closed);
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

/** One RPC at its edge: readiness, credential, size before the body, then each message by its prefix; refusals thrown from the body. */
export class RpcAdmission {
  readonly protocol: WireProtocol | undefined;
  /** Whether the body failed (a refusal, the client gone): a failure to parse is then no malformed message. */
  bodyFailed = false;
  /** Whether the call reached the interceptors (a unary call's message was parsed). */
  invoked = false;
  private readonly held: BodyAdmission;
  private reader: PulledBody | undefined;
  private readonly clientStreams: boolean;
  /** A unary body's Content-Length: its memory is then taken whole, before it is read. */
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
    const kind = policy.method.methodKind;
    this.clientStreams = kind === "client_streaming" || kind === "bidi_streaming";
    const length = Number(request.headers["content-length"] ?? NaN);
    this.announced = Number.isSafeInteger(length) && !this.clientStreams ? length : undefined;
    if (hooks.requestTimeoutMs !== undefined) {
      this.timer = setTimeout(() => this.expire(), hooks.requestTimeoutMs);
      request.raw.once("end", () => clearTimeout(this.timer));
    }
    // The call is over: what it holds goes back, and a body nobody reads any more (Connect stopped early) is abandoned.
    reply.raw.once("close", () => {
      clearTimeout(this.timer);
      this.reader?.detach();
      this.held.release();
      if (!request.raw.readableEnded) hooks.abandonBody(request, reply);
    });
  }

  private get methodName() {
    return `${this.policy.service.typeName}/${this.policy.method.name}`;
  }

  /** Every protocol but Connect's unary calls sends a sequence of length-prefixed envelopes. */
  private get enveloped() {
    return this.protocol !== undefined && this.protocol !== "connect-unary";
  }

  get client(): string | undefined {
    return this.hooks.callerOf(this.request);
  }

  async refusalBeforeBody(): Promise<ConnectError | undefined> {
    const refusal = await admitHeaders(this.policy, this.settings, credentialsOf(this.request.headers), this.client);
    if (refusal?.refused === "not_serving") return notServing(this.settings.readiness);
    if (refusal) {
      if (refusal.error instanceof ConnectError) return refusal.error;
      this.log(`${this.policy.method.name}: credential check failed`, refusal.error);
      return edgeFailure(refusal.error);
    }
    if (this.timedOut) return requestTimedOut(this.hooks.requestTimeoutMs!);
    if (this.announced === undefined) return undefined;
    const envelope = this.enveloped ? ENVELOPE_HEADER_BYTES : 0;
    if (this.announced > this.policy.maxMessageBytes + envelope) {
      return messageTooLarge(this.methodName, this.policy.maxMessageBytes, this.announced - envelope);
    }
    return this.refused(this.held.hold(this.announced, this.announced));
  }

  private refused(refusal: BodyRefusal | undefined): ConnectError | undefined {
    if (refusal?.kind === "too_large") return messageTooLarge(this.methodName, refusal.limit, refusal.size);
    if (refusal?.kind === "too_many_uploads") return tooManyUploads(UPLOAD_RETRY_AFTER_SECONDS);
    return refusal && bodyMemoryFull(BODY_MEMORY_RETRY_AFTER_SECONDS);
  }

  /** The answer is ready (a unary call's message, a stream's start). */
  answering(): void {
    this.hooks.answering?.(this.request);
  }

  /** The body Connect reads: each piece admitted as it arrives; a refusal is thrown and the rest abandoned. */
  async *body(): AsyncGenerator<Uint8Array> {
    if (this.timedOut) {
      this.bodyFailed = true;
      throw requestTimedOut(this.hooks.requestTimeoutMs!);
    }
    const reader = (this.reader = new PulledBody(this.request.raw));
    const sized = this.announced !== undefined;
    const admit = (size: number, memory: number) => {
      const refusal = this.refused(this.held.hold(size, sized ? 0 : memory));
      if (refusal) throw refusal;
    };
    const encoding = this.request.headers[this.protocol === "connect-stream" ? "connect-content-encoding" : "grpc-encoding"];
    const declared = Array.isArray(encoding) ? encoding[0] : encoding;
    const envelopes = new EnvelopeSizes((size, flags) => {
      // 0, or 1 (compressed) with a real encoding: gRPC's libraries would read anything else as uncompressed or a trailer.
      const compressed = flags === 1 && declared !== undefined && declared !== "" && declared !== "identity";
      if (flags !== 0 && !compressed) throw invalidMessageFlags(flags, declared);
      admit(size, size);
    }, () => {
      // Each of a client stream's messages gives back what it held once it has arrived whole.
      if (this.clientStreams) this.held.release();
    });
    let total = 0;
    try {
      for (let chunk = await reader.read(); chunk !== undefined; chunk = await reader.read()) {
        if (this.enveloped) envelopes.feed(chunk);
        else admit((total += chunk.byteLength), chunk.byteLength);
        yield chunk;
      }
    } catch (error) {
      this.bodyFailed = true;
      reader.detach();
      this.hooks.abandonBody(this.request, this.reply);
      throw error;
    } finally {
      reader.detach();
      this.held.release();
    }
  }

  /** HTTP_REQUEST_TIMEOUT: a request still arriving is refused (or, already answered, abandoned). */
  private expire(): void {
    if (this.request.raw.readableEnded) return;
    this.timedOut = true;
    this.reader?.fail(requestTimedOut(this.hooks.requestTimeoutMs!));
    if (this.reply.raw.writableEnded) this.hooks.abandonBody(this.request, this.reply);
  }
}
