import type { IncomingMessage } from "node:http";
import { Code, ConnectError } from "@connectrpc/connect";
import { universalRequestFromNodeRequest } from "@connectrpc/connect-node";
import { errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { httpErrorOf } from "../connect-errors.js";
import { clientOfRequest } from "../../client-address.js";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { EdgeLimits } from "../../../config/config.js";
import type { HeaderCheck, Readiness } from "../../../core/index.js";
import type { MethodPolicy } from "../../rpc/method-policy.js";
import { EnvelopeSizes, headerValue } from "../../rpc/call-guard.js";
import { bodyMemoryFull, edgeFailure, invalidMessageFlags, messageTooLarge, notServing, tooManyUploads } from "../../rpc/refusals.js";
import { envelopeFlagsAllowed, isEnveloped, messageEncodingHeader, protocolOf, type WireProtocol } from "../../rpc/wire-protocol.js";
import type { BodyBudget, BodyHold, ReleaseSlot, UploadSlots } from "../../upload-slots.js";
import { BODY_MEMORY_RETRY_AFTER_SECONDS, lingerUntilDiscarded, UPLOAD_RETRY_AFTER_SECONDS } from "./body-guard.js";

/**
 * The headers that carry a caller's credentials, as the core reads them: the
 * key or a token (Bearer, or x-vendor-api-key), and a panel session with its
 * CSRF token.
 */
export const CREDENTIAL_HEADERS = ["authorization", "x-vendor-api-key", "x-panel-session", "x-csrf-token"] as const;

/** The web panel's session cookie (HttpOnly, SameSite=Strict): the gateway passes it on as x-panel-session. */
export const SESSION_COOKIE = "gs_session";

/** A cookie's value from a Cookie header ("a=1; b=2"), or undefined. */
export function cookieValue(header: string | null | undefined, name: string): string | undefined {
  for (const pair of (header ?? "").split(";")) {
    const at = pair.indexOf("=");
    if (at > 0 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim();
  }
  return undefined;
}

/**
 * Only the credentials of `headers`: what the gateway passes on to the core,
 * and what its own check looks at. The panel's session cookie becomes
 * x-panel-session (the core still wants the CSRF token beside it).
 */
export function credentialsOf(headers: Headers | FastifyRequest["headers"]): Headers {
  const read = (name: string) => {
    const value = headers instanceof Headers ? headers.get(name) : headers[name];
    return typeof value === "string" ? value : undefined;
  };
  const credentials = new Headers();
  for (const name of CREDENTIAL_HEADERS) {
    const value = read(name);
    if (value !== undefined) credentials.set(name, value);
  }
  const session = cookieValue(read("cookie"), SESSION_COOKIE);
  if (session && !credentials.has("x-panel-session")) credentials.set("x-panel-session", session);
  return credentials;
}

export interface RpcAdmissionSettings {
  readonly readiness: Readiness;
  readonly headerCheck: HeaderCheck;
  readonly edge: EdgeLimits;
  readonly uploadSlots: UploadSlots;
  readonly bodyBudget: BodyBudget;
}

const ENVELOPE_HEADER_BYTES = 5;

const CLIENT_WENT_AWAY = new ConnectError("the client closed the request", Code.Canceled);

/** An RPC's path, `/package.Service/Method`: what Connect and gRPC-Web clients call. */
export const RPC_PATH = /^\/[a-z_]\w*(\.[a-z_]\w*)*\.[A-Z]\w*\/[A-Z]\w*$/;

/**
 * A call of a method this port does not serve (an unknown method or
 * service), answered as the core port answers it (answerUnknownMethod):
 * gRPC-Web gets a trailers-only UNIMPLEMENTED, Connect (and a JSON POST of
 * no known protocol) Connect's `unimplemented` with HTTP 404; never the REST
 * shape. Undefined when the request is no RPC (a REST path, a GET), which the
 * REST not-found answer takes.
 */
export function answerUnknownRpc(request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined {
  const path = request.url.split("?", 1)[0]!;
  if (request.method !== "POST" || !RPC_PATH.test(path)) return undefined;
  const protocol = protocolOf(request.headers["content-type"]);
  const error = new ConnectError(`unknown method ${path}`, Code.Unimplemented);
  lingerUntilDiscarded(request);
  if (protocol === "grpc-web" || protocol === "grpc") {
    reply.code(200).header("content-type", request.headers["content-type"]!);
    setTrailerStatus(new Headers(), error).forEach((value, name) => reply.header(name, value));
    return reply.send();
  }
  return reply.code(404).header("content-type", "application/json").send(Buffer.from(errorToJsonBytes(error, undefined)));
}

/** A body that refuses the call at Connect's first read: Connect then answers `error` in the caller's protocol. */
export async function* refusing(error: ConnectError): AsyncGenerator<Uint8Array> {
  throw error;
}

/** Connect sizes a unary Connect body by Content-Length before reading it; a refused body has none to size. */
export function withBody(request: UniversalServerRequest, body: AsyncIterable<Uint8Array>): UniversalServerRequest {
  const header = new Headers(request.header);
  header.delete("content-length");
  return { ...request, header, body };
}

/**
 * Refuses a call on the gateway port through its Connect handler: Connect
 * writes `refusal` in the caller's protocol (a Connect error JSON, a
 * gRPC-Web trailer frame, or its own 415 or 405), with Retry-After when the
 * refusal says when to come back. Sent with reply.send, so the reply's
 * headers (CORS) go with it. What the client still sends is discarded,
 * bounded (lingerUntilDiscarded).
 */
export async function answerThroughHandler(
  handler: UniversalHandler, request: FastifyRequest, reply: FastifyReply, refusal: ConnectError,
): Promise<FastifyReply> {
  lingerUntilDiscarded(request);
  const universal = universalRequestFromNodeRequest(request.raw, reply.raw, undefined, undefined);
  const response = await handler(withBody(universal, refusing(refusal)));
  const { retryAfterSeconds } = httpErrorOf(refusal);
  if (retryAfterSeconds) reply.header("retry-after", String(retryAfterSeconds));
  return sendWhole(reply, response);
}

/** A short answer of Connect's (a refusal: no trailers on HTTP/1.1), sent whole. */
async function sendWhole(reply: FastifyReply, response: UniversalServerResponse): Promise<FastifyReply> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of response.body ?? []) chunks.push(chunk);
  reply.code(response.status);
  new Headers(response.header).forEach((value, name) => {
    if (name !== "content-length") reply.header(name, value);
  });
  return reply.send(Buffer.concat(chunks));
}

/**
 * The request body pulled chunk by chunk in paused mode: nothing is read
 * that is not asked for, and `detach` leaves the rest unread, to be
 * discarded (an async iterator over the request would destroy it, and with
 * it the connection the refusal has to go out on).
 */
class PulledBody {
  private failure: unknown;
  private wake: (() => void) | undefined;

  constructor(private readonly incoming: IncomingMessage) {
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

  private readonly fail = (error: unknown) => {
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
 * One RPC on the gateway port, seen from its edge: what the core port's
 * GuardedCall checks, over HTTP/1.1. From the headers alone, before a byte
 * of the body is read: readiness, the credential its method needs, a
 * protocol Connect serves here, and the announced size (the method's limit,
 * then an upload slot for a large body, then its bytes from MAX_BODY_MEMORY).
 * Then, while the body arrives (chunked, its size unannounced), the same
 * limits piece by piece, and the message's length prefix against the
 * method's limit. What it holds goes back once the body has been read whole,
 * or the call ended, never held for the answer.
 */
export class RpcAdmission {
  readonly protocol: WireProtocol | undefined;
  private readonly limit: number;
  private releaseSlot: ReleaseSlot | undefined;
  private memory: BodyHold | undefined;
  private reader: PulledBody | undefined;
  /** The body's size as its Content-Length announced it (its memory then taken whole, before it is read). */
  private readonly announced: number | undefined;

  constructor(
    private readonly request: FastifyRequest,
    reply: FastifyReply,
    readonly policy: MethodPolicy,
    private readonly settings: RpcAdmissionSettings,
  ) {
    this.protocol = protocolOf(request.headers["content-type"]);
    this.limit = policy.maxMessageBytes + (isEnveloped(this.protocol) ? ENVELOPE_HEADER_BYTES : 0);
    const length = Number(request.headers["content-length"] ?? NaN);
    this.announced = Number.isSafeInteger(length) ? length : undefined;
    // The call is over (answered, or its client gone): whatever it holds goes back, and a body nobody reads any
    // more (Connect stopped early) is discarded within the refusals' bounds.
    reply.raw.once("close", () => {
      this.reader?.detach();
      this.release();
      if (!request.raw.complete) lingerUntilDiscarded(request);
    });
  }

  private get methodName() {
    return `${this.policy.service.typeName}/${this.policy.method.name}`;
  }

  /** The refusal owed before any byte of the body is read, if any. */
  async refusalBeforeBody(): Promise<ConnectError | undefined> {
    if (!this.settings.readiness.current.serving) return notServing(this.settings.readiness);
    if (this.policy.credential !== undefined) {
      try {
        await this.settings.headerCheck(credentialsOf(this.request.headers), this.policy.credential, clientOfRequest(this.request));
      } catch (error) {
        if (error instanceof ConnectError) return error;
        this.request.log.error({ err: error }, `${this.policy.method.name}: credential check failed`);
        return edgeFailure(error);
      }
    }
    if (this.announced === undefined) return undefined;
    if (this.announced > this.limit) {
      const messageBytes = this.announced - (isEnveloped(this.protocol) ? ENVELOPE_HEADER_BYTES : 0);
      return messageTooLarge(this.methodName, this.policy.maxMessageBytes, messageBytes);
    }
    if (this.announced > this.settings.edge.largeUploadBytes && !this.takeSlot()) return tooManyUploads(UPLOAD_RETRY_AFTER_SECONDS);
    if (this.announced > 0 && !this.takeMemory(this.announced)) return bodyMemoryFull(BODY_MEMORY_RETRY_AFTER_SECONDS);
    return undefined;
  }

  private takeSlot(): boolean {
    this.releaseSlot ??= this.settings.uploadSlots.tryTake();
    return this.releaseSlot !== undefined;
  }

  private takeMemory(bytes: number): boolean {
    const taken = (this.memory ??= this.settings.bodyBudget.open()).take(bytes);
    if (!taken) this.release();
    return taken;
  }

  private release(): void {
    this.releaseSlot?.();
    this.releaseSlot = undefined;
    this.memory?.release();
    this.memory = undefined;
  }

  /**
   * The answer is ready (a unary call's message, a stream's start): from now a client that stops reading it
   * for HTTP_IDLE_TIMEOUT is cut again (the gateway's preHandler paused that timeout while the service worked).
   */
  answering(): void {
    this.request.raw.socket?.setTimeout(this.settings.edge.idleTimeoutMs);
  }

  /**
   * The body Connect reads: the request's pieces as they arrive, each one
   * admitted first; a refusal is thrown from the body (Connect answers it in
   * the caller's protocol) and the rest of what the client sends discarded.
   */
  async *body(): AsyncGenerator<Uint8Array> {
    const reader = (this.reader = new PulledBody(this.request.raw));
    const prefix = Buffer.alloc(ENVELOPE_HEADER_BYTES);
    const encoding = headerValue(this.request.headers[messageEncodingHeader(this.protocol)]);
    let badFlags: ConnectError | undefined;
    // Every envelope's flags, as on the core port: Connect would skip one flagged 0x80 (gRPC-Web) or 0x02 (Connect) as an end.
    const envelopes = new EnvelopeSizes((_size, flags) => {
      if (!envelopeFlagsAllowed(flags, encoding)) badFlags ??= invalidMessageFlags(flags, encoding);
    }, () => {});
    let total = 0;
    try {
      for (let chunk = await reader.read(); chunk !== undefined; chunk = await reader.read()) {
        if (isEnveloped(this.protocol) && total < ENVELOPE_HEADER_BYTES) chunk.copy(prefix, total, 0, ENVELOPE_HEADER_BYTES - total);
        if (isEnveloped(this.protocol)) envelopes.feed(chunk);
        total += chunk.byteLength;
        const refusal = badFlags ?? this.admit(total, chunk.byteLength, total >= ENVELOPE_HEADER_BYTES ? prefix.readUInt32BE(1) : undefined);
        if (refusal) {
          reader.detach();
          lingerUntilDiscarded(this.request);
          throw refusal;
        }
        yield chunk;
      }
    } finally {
      reader.detach();
      this.release();
    }
  }

  /** `total` bytes have arrived, `latest` of them just now; `messageSize`: what the envelope's length prefix announces. */
  private admit(total: number, latest: number, messageSize: number | undefined): ConnectError | undefined {
    const { maxMessageBytes } = this.policy;
    if (messageSize !== undefined && messageSize > maxMessageBytes) return messageTooLarge(this.methodName, maxMessageBytes, messageSize);
    if (total > this.limit) return messageTooLarge(this.methodName, maxMessageBytes, total);
    // Announced by Content-Length (which Node holds the body to): slot and memory were taken before the body.
    if (this.announced !== undefined) return undefined;
    if (total > this.settings.edge.largeUploadBytes && !this.takeSlot()) return tooManyUploads(UPLOAD_RETRY_AFTER_SECONDS);
    if (!this.takeMemory(latest)) return bodyMemoryFull(BODY_MEMORY_RETRY_AFTER_SECONDS);
    return undefined;
  }
}
