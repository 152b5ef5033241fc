import { constants, type Http2ServerRequest, type Http2Session, type ServerHttp2Stream } from "node:http2";
import type { AnswerDelivery, HeaderCheck, Readiness } from "../../core/index.js";
import { Code, ConnectError } from "@connectrpc/connect";
import type { BodyBudget, BodyHold, ReleaseSlot } from "../upload-slots.js";
import type { DebugLog } from "./connection-guard.js";
import type { MethodPolicy } from "./method-policy.js";
import { bodyMemoryFull, edgeFailure, invalidMessageFlags, messageTooLarge, notServing, requestTimedOut, tooManyUploads } from "./refusals.js";
import { envelopeFlagsAllowed, isEnveloped, messageEncodingHeader, type WireProtocol } from "./wire-protocol.js";

/** The per-process large-upload slots (src/transport/upload-slots.ts), as the edge uses them. */
export interface UploadSlotsLike {
  tryTake(): (() => void) | undefined;
}

export interface CallGuardSettings {
  readonly readiness: Readiness;
  readonly headerCheck: HeaderCheck;
  /** The client a call counts against (failed credentials): its connection's address, or the one its gateway signed for. */
  readonly callerOf: (session: Http2Session | undefined, headers: Headers) => string | undefined;
  /** HTTP_REQUEST_TIMEOUT: the whole request message must have arrived within this (the response may take longer). */
  readonly requestTimeoutMs: number;
  /** LARGE_UPLOAD_BYTES: a message above this takes an upload slot until it has been read whole (the request's end). */
  readonly largeUploadBytes: number;
  readonly uploads: UploadSlotsLike;
  readonly uploadRetryAfterSeconds: number;
  /**
   * MAX_BODY_MEMORY, shared by both ports: every message takes its announced size (length prefix, or a
   * Connect unary call's Content-Length; what has arrived so far when neither tells) until it has been read whole.
   */
  readonly bodyBudget: Pick<BodyBudget, "open">;
  readonly bodyMemoryRetryAfterSeconds: number;
  /** Crashes of the edge's own checks (error level, with the stack). */
  readonly log: (message: string, error: unknown) => void;
  /** What is no one's fault here (a client that went away): debug level, no stack. */
  readonly debug: DebugLog;
}

const ENVELOPE_HEADER_BYTES = 5;

const CLIENT_WENT_AWAY = new ConnectError("the client closed the stream", Code.Canceled);

/**
 * Pulls a request body chunk by chunk, in paused mode (nothing is read that
 * is not asked for, so HTTP/2 flow control holds the sender back). `fail`
 * makes the pending read, and every later one, throw.
 */
class BodyReader {
  private failure: unknown;
  private wake: (() => void) | undefined;

  constructor(private readonly request: Http2ServerRequest) {
    request.on("readable", this.poke);
    request.on("end", this.poke);
    request.on("error", (error) => this.fail(error));
    request.on("close", () => {
      if (!request.readableEnded) this.fail(CLIENT_WENT_AWAY);
    });
  }

  private readonly poke = () => {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  };

  /** Stops listening: the request is no longer read here. */
  detach(): void {
    this.request.off("readable", this.poke);
    this.request.off("end", this.poke);
  }

  fail(error: unknown): void {
    this.failure ??= error;
    this.poke();
  }

  async read(): Promise<Buffer | undefined> {
    for (;;) {
      if (this.failure !== undefined) throw this.failure;
      const chunk = this.request.read() as Buffer | null;
      if (chunk !== null) return chunk;
      if (this.request.readableEnded) return undefined;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}

/** One value of a request header (Node gives a list for a repeated one: the first counts). */
export const headerValue = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/** Undelivered: the stream closed (a reset, the connection gone) before the answer was written whole. */
export function streamDelivery(stream: ServerHttp2Stream): AnswerDelivery {
  return {
    onUndelivered(undelivered) {
      if (stream.writableFinished) return;
      if (stream.closed || stream.destroyed) undelivered();
      else stream.once("close", () => stream.writableFinished || undelivered());
    },
  };
}

const methodNameOf = (policy: MethodPolicy) => `${policy.service.typeName}/${policy.method.name}`;

/**
 * What the headers alone refuse a call for, checked before its message is
 * read: the process cannot serve (UNAVAILABLE), or the method's credential
 * is missing or wrong.
 */
export async function headerRefusal(
  policy: MethodPolicy, settings: Pick<CallGuardSettings, "readiness" | "headerCheck" | "log">, headers: Headers, client: string | undefined,
): Promise<ConnectError | undefined> {
  if (!policy.servedWhileNotReady && !settings.readiness.current.serving) return notServing(settings.readiness);
  if (policy.credential === undefined) return undefined;
  try {
    await settings.headerCheck(headers, policy.credential, client);
    return undefined;
  } catch (error) {
    if (error instanceof ConnectError) return error;
    settings.log(`${policy.method.name}: credential check failed`, error);
    return edgeFailure(error);
  }
}

/**
 * What the request message being received holds: an upload slot (a large
 * one) and its share of body memory (its announced size, or what has
 * arrived), until `release`.
 */
export class MessageHolds {
  private releaseSlot: ReleaseSlot | undefined;
  private memory: BodyHold | undefined;

  constructor(
    private readonly policy: MethodPolicy,
    private readonly settings: Pick<CallGuardSettings, "largeUploadBytes" | "uploads" | "uploadRetryAfterSeconds" | "bodyBudget" | "bodyMemoryRetryAfterSeconds">,
  ) {}

  /**
   * A message of `size` bytes that takes `memory` more bytes of body memory: its announced size at once,
   * or (a body of unknown size) the piece that has just arrived.
   * Refused, in this order: over its method's limit (422); large with no upload slot free (429); no body memory left (503).
   */
  admitOrRefuse(size: number, memory: number): ConnectError | undefined {
    if (size > this.policy.maxMessageBytes) return messageTooLarge(methodNameOf(this.policy), this.policy.maxMessageBytes, size);
    if (size > this.settings.largeUploadBytes && this.releaseSlot === undefined) {
      this.releaseSlot = this.settings.uploads.tryTake();
      if (this.releaseSlot === undefined) return tooManyUploads(this.settings.uploadRetryAfterSeconds);
    }
    if (memory > 0 && !(this.memory ??= this.settings.bodyBudget.open()).take(memory)) {
      this.release();
      return bodyMemoryFull(this.settings.bodyMemoryRetryAfterSeconds);
    }
    return undefined;
  }

  /** The message has been read whole, or the call is over: the upload slot and body memory go back. */
  release(): void {
    this.releaseSlot?.();
    this.releaseSlot = undefined;
    this.memory?.release();
    this.memory = undefined;
  }
}

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
 * One call on the core port, seen from the edge: the checks that need only
 * the headers (readiness, credentials, Content-Length), then the body as
 * Connect reads it, with each message's size taken from its length prefix
 * before a byte of it is buffered: its share of the process's body memory
 * and, for a large one, an upload slot, both held until the message has been
 * read whole (or the call ended), not for as long as the answer takes; and
 * the request timeout. "Read whole" is the end of the request body: Connect
 * reads a call's one request message until the request ends (to be sure no
 * second one follows) and holds it meanwhile, so a client that sends its
 * message and keeps the stream open still holds what the message holds. A
 * client stream (reflection's ServerReflectionInfo) is the exception: each of
 * its messages gives back what it holds as soon as it has arrived whole. The
 * request timeout bounds such a stream as any other request (it ends with
 * DEADLINE_EXCEEDED; grpcurl and buf curl are done in well under a second).
 * A refusal is thrown from the body, so Connect answers it in the caller's
 * protocol (gRPC status, gRPC-Web trailer, Connect JSON).
 */
export class GuardedCall {
  private reader: BodyReader | undefined;
  private timedOut = false;
  /** An unenveloped body whose Content-Length was admitted before it was read. */
  private sized = false;
  private readonly holds: MessageHolds;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly request: Http2ServerRequest,
    private readonly policy: MethodPolicy,
    private readonly protocol: WireProtocol | undefined,
    private readonly settings: CallGuardSettings,
  ) {
    this.holds = new MessageHolds(policy, settings);
    this.timer = setTimeout(() => this.expire(), settings.requestTimeoutMs);
    request.once("end", () => clearTimeout(this.timer));
    request.stream.once("close", () => {
      clearTimeout(this.timer);
      this.bodyRead();
    });
    // Once the answer is out, a request side still open (a refusal, a timeout) is closed with RST_STREAM NO_ERROR,
    // as HTTP/2 allows after a complete response (RFC 9113, 8.1), so the sender stops and the stream slot is free.
    // Http2ServerResponse always ends with trailers (gRPC's status; empty otherwise), sent on "wantTrailers":
    // the close comes after them. Should that event not come, the request timeout closes the stream.
    request.stream.once("wantTrailers", () => setImmediate(() => this.closeRequestSide()));
  }

  /** The refusal owed before any byte of the body is read, if any. */
  async refusalBeforeBody(headers: Headers, client: string | undefined): Promise<ConnectError | undefined> {
    const refusal = await headerRefusal(this.policy, this.settings, headers, client);
    if (refusal) return refusal;
    if (this.timedOut) return requestTimedOut(this.settings.requestTimeoutMs);
    const length = Number(headers.get("content-length") ?? NaN);
    if (!isEnveloped(this.protocol)) {
      // A whole unenveloped message announced by Content-Length: judged (and its memory taken) before Connect allocates for it.
      this.sized = Number.isSafeInteger(length);
      if (this.sized) return this.holds.admitOrRefuse(length, length);
    } else if (Number.isSafeInteger(length) && length > this.policy.maxMessageBytes + ENVELOPE_HEADER_BYTES) {
      // Content-Length bounds a single message: a client stream's messages are each judged by their length prefix.
      if (!this.clientStreams) return messageTooLarge(methodNameOf(this.policy), this.policy.maxMessageBytes, length - ENVELOPE_HEADER_BYTES);
    }
    return undefined;
  }

  private admit(size: number, memory: number): void {
    const refusal = this.holds.admitOrRefuse(size, memory);
    if (refusal) throw refusal;
  }

  /** The request body has been read whole (Connect has its message), or the call is over: the upload slot and body memory go back. */
  private bodyRead(): void {
    this.holds.release();
  }

  /**
   * The body Connect reads: the request's chunks as they come, each message admitted by its length prefix
   * first; slot and memory go back once the request has ended.
   */
  async *body(): AsyncGenerator<Uint8Array> {
    if (this.timedOut) throw requestTimedOut(this.settings.requestTimeoutMs);
    const reader = (this.reader = new BodyReader(this.request));
    const enveloped = isEnveloped(this.protocol);
    // A client stream (reflection) sends message after message on one request: each one's memory and slot go back
    // as soon as its last byte is here, not at the request's end, so a long stream holds no more than the message
    // being received (and the chunk in hand, which HTTP/2's frame size and flow-control window bound).
    const messageDone = () => {
      if (this.clientStreams) this.bodyRead();
    };
    const encoding = headerValue(this.request.headers[messageEncodingHeader(this.protocol)]);
    const envelopes = new EnvelopeSizes((size, flags) => {
      if (!envelopeFlagsAllowed(flags, encoding)) throw invalidMessageFlags(flags, encoding);
      this.admit(size, size);
    }, messageDone);
    let total = 0;
    for (let chunk = await reader.read(); chunk !== undefined; chunk = await reader.read()) {
      if (!enveloped) {
        total += chunk.byteLength;
        // Sized by Content-Length (which HTTP/2 holds the body to), its memory was taken whole before the body.
        this.admit(total, this.sized ? 0 : chunk.byteLength);
      } else {
        envelopes.feed(chunk);
      }
      yield chunk;
    }
    this.bodyRead();
  }

  /** Whether the method takes a stream of request messages (rather than exactly one). */
  private get clientStreams(): boolean {
    const kind = this.policy.method.methodKind;
    return kind === "client_streaming" || kind === "bidi_streaming";
  }

  /** HTTP_REQUEST_TIMEOUT: a request still arriving is refused (or, already answered, closed). */
  private expire(): void {
    if (this.request.readableEnded) return;
    this.timedOut = true;
    this.reader?.fail(requestTimedOut(this.settings.requestTimeoutMs));
    if (this.request.stream.writableEnded) this.closeRequestSide();
  }

  private closeRequestSide(): void {
    const stream = this.request.stream;
    if (this.request.readableEnded || stream.closed || stream.destroyed) return;
    // What arrived and was not read is dropped: Node destroys a closed stream only once its readable side has ended.
    this.reader?.detach();
    this.request.resume();
    stream.close(constants.NGHTTP2_NO_ERROR);
  }
}
