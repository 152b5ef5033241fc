import type { IncomingMessage } from "node:http";
import { Transform, type Readable } from "node:stream";
import type { FastifyReply, FastifyRequest, RequestPayload } from "fastify";
import type { EdgeLimits } from "../../../config/config.js";
import type { Credential, HeaderCheck, ValidationLimits } from "../../../core/index.js";
import { admitHeaders, BODY_MEMORY_RETRY_AFTER_SECONDS, BodyAdmission, type BodyRefusal, UPLOAD_RETRY_AFTER_SECONDS } from "../../admission.js";
import type { BodyBudget, UploadSlots } from "../../upload-slots.js";
import { platformHeaders, vendorHeaders } from "../call-options.js";
import { bodyTooLarge, replyWithError, sizeText, unsupportedMediaType } from "../error-replies.js";
import { GatewayError } from "../gateway-error.js";
import { clientOfRequest } from "../../client-address.js";
import { otherFieldsBytes } from "../streamed-images.js";

/**
 * After refusing a request whose body has not arrived, the connection reads
 * and discards what the client still sends for at most this long and this
 * much (so the client reads the answer instead of a reset), then closes.
 */
export const LINGER_MS = 2_000;
const LINGER_BYTES = 4 * 1024 * 1024;

/**
 * Bytes a request with inline input images may carry: the images as base64
 * (4 characters per 3 bytes) plus what its other fields may take
 * (otherFieldsBytes, shared with the streamed path).
 */
export function generationBodyBytes(limits: ValidationLimits, edge: EdgeLimits): number {
  return 4 * Math.ceil(limits.maxInputBytes / 3) + otherFieldsBytes(limits, edge.maxBodyBytes);
}

export interface BodyRoute {
  /** What a caller needs before its body is read. */
  readonly credential: Credential;
  /** Where the key travels: `authorization: Bearer` (platform, admin) or `x-vendor-api-key` / `x-goog-api-key` / `?key=` (vendor). */
  readonly keyFrom: "platform" | "vendor";
  /** Whether the body may carry inline input images (the generation limit) or not (MAX_BODY_BYTES). */
  readonly images: boolean;
}

export interface BodyGuardOptions {
  readonly headerCheck: HeaderCheck;
  readonly uploadSlots: UploadSlots;
  /** MAX_BODY_MEMORY: bytes of bodies being received at once, every body counted (shared with the core's port). */
  readonly bodyBudget: BodyBudget;
  readonly edge: EdgeLimits;
  /** See generationBodyBytes. */
  readonly generationBodyBytes: number;
}

/** Makes the options of one route that takes a body. */
export type BodyGuard = ReturnType<typeof bodyGuard>;

/**
 * 503 server_busy: the bodies being received already hold MAX_BODY_MEMORY
 * between them. The same reason as the core port's refusal for want of body
 * memory (one budget for both ports).
 */
export function bodyMemoryFull(): GatewayError {
  return new GatewayError(
    503, "server_busy", "too many request bodies are being received at once; retry shortly", BODY_MEMORY_RETRY_AFTER_SECONDS,
  );
}

/**
 * Route options for every route that takes a body: `bodyLimit`, and an
 * onRequest hook that decides from the headers alone, before a byte of the
 * body is read, in this order: the credential (401), the body's media type
 * (415 unless JSON), the announced size (422 input_too_large), for a large
 * upload (more than LARGE_UPLOAD_BYTES announced, or chunked where images may
 * come) one of the process's upload slots (429 too_many_uploads with
 * Retry-After), and the announced size from the body budget
 * (MAX_BODY_MEMORY, 503 server_busy with Retry-After). The
 * readiness gate (503) runs before it. Slot and budget are given back as
 * soon as the body has been read whole, or the request closed, or its answer
 * ended (a body left unread), whichever comes first: never held for the
 * answer (an SSE stream).
 *
 * A chunked body announces no size: it takes from the budget as its bytes
 * arrive (a counting stream put in front of the parser, preParsing), and is
 * refused with the same 503 once the next piece does not fit. Taking the
 * route's limit instead would make one chunked upload on an image route hold
 * 273.8 MiB (by default) of a budget it rarely uses.
 */
export function bodyGuard(options: BodyGuardOptions) {
  const { edge, uploadSlots } = options;
  /** A refusal of the admission module as this surface answers it. */
  const refusalOf = (refusal: BodyRefusal): GatewayError => {
    if (refusal.kind === "too_large") return bodyTooLarge(refusal.limit);
    if (refusal.kind === "no_body_memory") return bodyMemoryFull();
    return new GatewayError(
      429, "too_many_uploads",
      `all ${uploadSlots.capacity} slots for large uploads (bodies over ${sizeText(edge.largeUploadBytes)}) are taken; retry shortly`,
      UPLOAD_RETRY_AFTER_SECONDS,
    );
  };
  return (route: BodyRoute) => {
    const bodyLimit = route.images ? options.generationBodyBytes : edge.maxBodyBytes;
    const headersOf = route.keyFrom === "vendor" ? vendorHeaders : platformHeaders;
    // The readiness gate (503) runs before this hook.
    const credentialFirst = { credential: route.credential, servedWhileNotReady: true };
    const onRequest = async (request: FastifyRequest, reply: FastifyReply) => {
      const refused = await admitHeaders(credentialFirst, options, headersOf(request), clientOfRequest(request));
      if (refused?.refused === "credential") return refuseBody(request, reply, refused.error);
      if (!hasBody(request)) return;
      // Parsers are looked up only once the body is read: a body that no parser takes is refused before.
      if (!sentAsJson(request)) return refuseBody(request, reply, unsupportedMediaType());
      const announced = announcedLength(request);
      const admission = new BodyAdmission(options, bodyLimit);
      // Chunked where images may come: it may be large, so it takes an upload slot; its bytes are taken as they arrive (preParsing).
      const refusal = announced !== undefined ? admission.hold(announced, announced) : route.images ? admission.takeSlot() : undefined;
      if (refusal) return refuseBody(request, reply, refusalOf(refusal));
      if (announced !== undefined || route.images) whenBodyDone(request, reply, () => admission.end());
    };
    /** A chunked body takes from the budget as it arrives. */
    const preParsing = async (request: FastifyRequest, reply: FastifyReply, payload: RequestPayload) => {
      if (!hasBody(request) || announcedLength(request) !== undefined) return payload;
      const memory = new BodyAdmission(options, bodyLimit);
      const counted = countedBody(request, payload, (bytes) => memory.take(bytes) === undefined, () => bodyMemoryFull());
      // Its pieces are held until the parser has taken them: the counting stream's end, not the request's.
      whenBodyDone(request, reply, () => memory.end(), counted, () => payload.unpipe(counted));
      return counted;
    };
    return { bodyLimit, onRequest, preParsing };
  };
}

function announcedLength(request: FastifyRequest): number | undefined {
  const header = request.headers["content-length"];
  return header === undefined ? undefined : Number(header);
}

/** Whether the request carries a body: a length above 0, or chunked. */
export function hasBody(request: FastifyRequest): boolean {
  const length = request.headers["content-length"];
  if (length !== undefined) return Number(length) > 0;
  return request.headers["transfer-encoding"] !== undefined;
}

/** Whether the body is sent as JSON: the media type Fastify's JSON parser is registered for (parameters aside, any case). */
function sentAsJson(request: FastifyRequest): boolean {
  const header = request.headers["content-type"];
  return header !== undefined && header.split(";", 1)[0]!.trim().toLowerCase() === "application/json";
}

/**
 * Calls `release` once, when the body has been read whole (the 'end' of
 * `body`: the request, or the stream the parser reads it through), the
 * request closed (the client went away), or its answer ended, whichever
 * comes first. A body whose answer ended before it was read whole (its
 * parser refused it mid-way) is no longer read by anyone: `abandon` stops
 * feeding it, and what the client still sends is discarded, bounded as after
 * a refusal (otherwise Node, seeing the body partly read, would leave it
 * unread and the connection stuck until HTTP_REQUEST_TIMEOUT).
 */
function whenBodyDone(
  request: FastifyRequest, reply: FastifyReply, release: () => void, body: Readable = request.raw, abandon: () => void = () => {},
): void {
  const incoming = request.raw;
  const response = reply.raw;
  if (body.readableEnded || body.destroyed || incoming.destroyed) return release();
  const done = () => {
    body.off("end", done);
    body.off("close", done);
    incoming.off("close", gone);
    response.off("close", answered);
    release();
  };
  // The request closes after its own end too: only an incomplete one means the client went away (a counting
  // stream may still hold pieces of a complete request that the parser has not taken yet).
  const gone = () => {
    if (body === incoming || !incoming.complete) done();
  };
  const answered = () => {
    done();
    if (body.readableEnded) return;
    abandon();
    lingerUntilDiscarded(request);
  };
  body.once("end", done);
  body.once("close", done);
  incoming.once("close", gone);
  response.once("close", answered);
}

/**
 * The body as it arrives, each piece first taken by `take`; a piece it
 * refuses fails the body with `refusal()` (answered by the error handler),
 * and what the client still sends is discarded as after a refusal.
 */
function countedBody(request: FastifyRequest, payload: RequestPayload, take: (bytes: number) => boolean, refusal: () => Error): Transform {
  const counted: Transform & { receivedEncodedLength?: number } = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (take(chunk.length)) {
        counted.receivedEncodedLength = (counted.receivedEncodedLength ?? 0) + chunk.length;
        callback(null, chunk);
        return;
      }
      payload.unpipe(counted);
      lingerUntilDiscarded(request);
      callback(refusal());
    },
  });
  // pipe() passes on neither errors nor a client that went away: the parser must see both.
  const failed = (error?: Error) => {
    if (!counted.destroyed) counted.destroy(error ?? Object.assign(new Error("the client went away"), { code: "ECONNRESET" }));
  };
  payload.once("error", failed);
  payload.once("close", () => {
    if (!(payload as IncomingMessage).complete) failed();
  });
  // Whoever reads the body listens for its errors; one raised after the reader stopped listening must not crash the process.
  counted.on("error", () => {});
  payload.pipe(counted);
  return counted;
}

/**
 * The one way a request is refused before its body is read: the body the
 * client may still send is discarded (bounded, see lingerUntilDiscarded)
 * while the error goes out in its surface's shape.
 */
export function refuseBody(request: FastifyRequest, reply: FastifyReply, error: unknown) {
  lingerUntilDiscarded(request);
  return replyWithError(error, request, reply);
}

/**
 * The body of a request that will not be read (refused, or a route that
 * takes none) is read and discarded, so the client reads the answer: closing
 * at once would reset the connection under it. Bounded: past LINGER_BYTES
 * discarded, or LINGER_MS after `from` ("now"; "answered": once the answer
 * has been sent) with the body still incomplete, the connection is closed.
 * A body read whole leaves the connection serving its next request.
 *
 * Costs one 'data' listener on the request per lingering body, and one
 * entry in a queue that a single shared timer serves; no timer of its own.
 * (The listener is on the request, not the socket: Node's HTTP parser reads
 * the socket itself, and a socket 'data' listener would change that. Once
 * the request has a listener Node does not dump the body itself, which would
 * drop it before any listener saw it.)
 */
export function lingerUntilDiscarded(request: FastifyRequest, from: "now" | { answered: FastifyReply } = "now"): void {
  const incoming = request.raw;
  if (incoming.complete || incoming.destroyed || !hasBody(request) || discarding.has(incoming)) return;
  discarding.add(incoming);
  let discarded = 0;
  incoming.on("data", (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > LINGER_BYTES) incoming.socket?.destroy();
  });
  // A 'data' listener does not restart a stream that was paused (a body unpiped from its parser).
  incoming.resume();
  if (from === "now") lingering.add(incoming);
  else from.answered.raw.once("finish", () => lingering.add(incoming));
}

/** Requests whose bodies are being discarded (a refusal mid-body may meet the end of its answer). */
const discarding = new WeakSet<IncomingMessage>();

/** A request lingering after a refusal, as the queue sees it (an IncomingMessage). */
export interface LingeringRequest {
  readonly complete: boolean;
  readonly socket: { destroy(): unknown } | null;
}

/** The time a linger queue keeps: its clock and its one timer (the system's, unless its tests give another). */
export interface LingerTime {
  now(): number;
  setTimeout(callback: () => void, ms: number): { unref(): unknown };
}

const SYSTEM_TIME: LingerTime = { now: () => Date.now(), setTimeout: (callback, ms) => setTimeout(callback, ms) };

/**
 * Connections lingering after a refusal, oldest first. Every entry waits the
 * same LINGER_MS, so the queue is in deadline order and one timer, armed for
 * the oldest, serves all of them; an entry whose body arrived (or whose
 * socket closed) meanwhile is dropped when its turn comes.
 */
export class LingerQueue {
  private entries: ({ readonly incoming: LingeringRequest; readonly deadline: number } | undefined)[] = [];
  private head = 0;
  private timer: { unref(): unknown } | undefined;

  constructor(
    private readonly lingerMs = LINGER_MS,
    private readonly time: LingerTime = SYSTEM_TIME,
  ) {}

  add(incoming: LingeringRequest): void {
    this.entries.push({ incoming, deadline: this.time.now() + this.lingerMs });
    if (!this.timer) this.arm();
  }

  private arm(): void {
    const next = this.entries[this.head];
    if (!next) {
      this.entries = [];
      this.head = 0;
      return;
    }
    this.timer = this.time.setTimeout(() => this.expire(), Math.max(0, next.deadline - this.time.now()));
    this.timer.unref();
  }

  private expire(): void {
    this.timer = undefined;
    const now = this.time.now();
    while (this.head < this.entries.length && this.entries[this.head]!.deadline <= now) {
      const { incoming } = this.entries[this.head]!;
      this.entries[this.head++] = undefined;
      // Still the request in flight on its connection (HTTP/1.1 reads the next one only after this body).
      if (!incoming.complete) incoming.socket?.destroy();
    }
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
    this.arm();
  }
}

const lingering = new LingerQueue();
