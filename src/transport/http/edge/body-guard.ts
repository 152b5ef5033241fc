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

/** A refused body is read and discarded for at most this long and this much, so its client reads the answer, not a reset. */
export const LINGER_MS = 2_000;
const LINGER_BYTES = 4 * 1024 * 1024;

/** Bytes a request with inline input images may carry: the images as base64 plus its other fields (shared with the streamed path). */
export function generationBodyBytes(limits: ValidationLimits, edge: EdgeLimits): number {
  return 4 * Math.ceil(limits.maxInputBytes / 3) + otherFieldsBytes(limits, edge.maxBodyBytes);
}

export interface BodyRoute {
  readonly credential: Credential;
  /** Where the key travels: `authorization: Bearer` (platform, admin) or `x-vendor-api-key` / `x-goog-api-key` / `?key=` (vendor). */
  readonly keyFrom: "platform" | "vendor";
  /** Whether the body may carry inline input images (the generation limit) or not (MAX_BODY_BYTES). */
  readonly images: boolean;
}

export interface BodyGuardOptions {
  readonly headerCheck: HeaderCheck;
  readonly uploadSlots: UploadSlots;
  /** MAX_BODY_MEMORY, shared with the core's port. */
  readonly bodyBudget: BodyBudget;
  readonly edge: EdgeLimits;
  readonly generationBodyBytes: number;
}

export type BodyGuard = ReturnType<typeof bodyGuard>;

/** 503 server_busy: bodies being received hold MAX_BODY_MEMORY (one budget with the core port's). */
export function bodyMemoryFull(): GatewayError {
  return new GatewayError(
    503, "server_busy", "too many request bodies are being received at once; retry shortly", BODY_MEMORY_RETRY_AFTER_SECONDS,
  );
}

/** A body route's options: `bodyLimit`, and 401, 415, 422, 429, 503 from the headers alone, after the readiness gate (503). */
export function bodyGuard(options: BodyGuardOptions) {
  const { edge, uploadSlots } = options;
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
    const credentialFirst = { credential: route.credential, servedWhileNotReady: true };
    const onRequest = async (request: FastifyRequest, reply: FastifyReply) => {
      const refused = await admitHeaders(credentialFirst, options, headersOf(request), clientOfRequest(request));
      if (refused?.refused === "credential") return refuseBody(request, reply, refused.error);
      if (!hasBody(request)) return;
      // Parsers are looked up only once the body is read: a body that no parser takes is refused before.
      if (!sentAsJson(request)) return refuseBody(request, reply, unsupportedMediaType());
      const announced = announcedLength(request);
      const admission = new BodyAdmission(options, bodyLimit);
      // Chunked where images may come: it may be large, so it takes a slot; its bytes are taken as they arrive (preParsing).
      const refusal = announced !== undefined ? admission.hold(announced, announced) : route.images ? admission.takeSlot() : undefined;
      if (refusal) return refuseBody(request, reply, refusalOf(refusal));
      if (announced !== undefined || route.images) whenBodyDone(request, reply, () => admission.end());
    };
    // A chunked body takes memory as it arrives: taking the route's limit would hold 273.8 MiB of the budget for it.
    const preParsing = async (request: FastifyRequest, reply: FastifyReply, payload: RequestPayload) => {
      if (!hasBody(request) || announcedLength(request) !== undefined) return payload;
      const memory = new BodyAdmission(options, bodyLimit);
      const counted = countedBody(request, payload, (bytes) => memory.take(bytes) === undefined);
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
  const length = announcedLength(request);
  return length === undefined ? request.headers["transfer-encoding"] !== undefined : length > 0;
}

/** Whether the body is sent as JSON: the media type Fastify's JSON parser is registered for (parameters aside, any case). */
function sentAsJson(request: FastifyRequest): boolean {
  const header = request.headers["content-type"];
  return header !== undefined && header.split(";", 1)[0]!.trim().toLowerCase() === "application/json";
}

/** `release` once the body ends, its client goes or its answer ends; a body left half-read is `abandon`ed, or Node would stall the connection. */
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
  // A request closes after its end too: only an incomplete one went away (a counting stream may still hold its pieces).
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

/** The body as it arrives, each piece first taken by `take`; a refused piece fails the body with 503 and the rest is discarded. */
function countedBody(request: FastifyRequest, payload: RequestPayload, take: (bytes: number) => boolean): Transform {
  const counted: Transform & { receivedEncodedLength?: number } = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (take(chunk.length)) {
        counted.receivedEncodedLength = (counted.receivedEncodedLength ?? 0) + chunk.length;
        callback(null, chunk);
        return;
      }
      payload.unpipe(counted);
      lingerUntilDiscarded(request);
      callback(bodyMemoryFull());
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
  // An error raised after the parser stopped listening must not crash the process.
  counted.on("error", () => {});
  payload.pipe(counted);
  return counted;
}

/** The one way a request is refused before its body is read: the error goes out while the body is discarded (bounded). */
export function refuseBody(request: FastifyRequest, reply: FastifyReply, error: unknown) {
  lingerUntilDiscarded(request);
  return replyWithError(error, request, reply);
}

/** Discards a body nobody reads, within LINGER_BYTES and LINGER_MS; on the request, since Node's parser owns the socket's reads. */
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

/** The clock and the one timer of a linger queue (the system's, unless its tests give another). */
export interface LingerTime {
  now(): number;
  setTimeout(callback: () => void, ms: number): { unref(): unknown };
}

const SYSTEM_TIME: LingerTime = { now: () => Date.now(), setTimeout: (callback, ms) => setTimeout(callback, ms) };

/** Lingering connections in deadline order (all wait LINGER_MS), so one timer, armed for the oldest, serves them all. */
export class LingerQueue {
  private readonly deadlines = new Map<LingeringRequest, number>();
  private timer: { unref(): unknown } | undefined;

  constructor(
    private readonly lingerMs = LINGER_MS,
    private readonly time: LingerTime = SYSTEM_TIME,
  ) {}

  add(incoming: LingeringRequest): void {
    if (this.deadlines.has(incoming)) return;
    this.deadlines.set(incoming, this.time.now() + this.lingerMs);
    this.timer ??= this.arm();
  }

  private arm(): { unref(): unknown } | undefined {
    for (const deadline of this.deadlines.values()) {
      const timer = this.time.setTimeout(() => this.expire(), Math.max(0, deadline - this.time.now()));
      timer.unref();
      return timer;
    }
    return undefined;
  }

  private expire(): void {
    const now = this.time.now();
    for (const [incoming, deadline] of this.deadlines) {
      if (deadline > now) break;
      this.deadlines.delete(incoming);
      // Still the request in flight on its connection (HTTP/1.1 reads the next one only after this body).
      if (!incoming.complete) incoming.socket?.destroy();
    }
    this.timer = this.arm();
  }
}

const lingering = new LingerQueue();
