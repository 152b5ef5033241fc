import type { FastifyReply, FastifyRequest } from "fastify";
import type { EdgeLimits } from "../../../config/config.js";
import type { Credential, HeaderCheck } from "../../../core/auth/header-check.js";
import type { ValidationLimits } from "../../../domain/validation/limits.js";
import type { UploadSlots } from "../../upload-slots.js";
import { platformHeaders, vendorHeaders } from "../call-options.js";
import { bodyTooLarge, replyWithError, sizeText } from "../error-replies.js";
import { GatewayError } from "../gateway-error.js";

/** Retry-After of 429 too_many_uploads: about the time a large upload takes on a good link. */
export const UPLOAD_RETRY_AFTER_SECONDS = 2;

/**
 * After refusing a request whose body has not arrived, the connection reads
 * and discards what the client still sends for at most this long and this
 * much (so the client reads the answer instead of a reset), then closes.
 */
const LINGER_MS = 2_000;
const LINGER_BYTES = 4 * 1024 * 1024;
const LINGER_POLL_MS = 20;

/**
 * Bytes a request with inline input images may carry: the images as base64
 * (4 characters per 3 bytes) plus room for the rest of the JSON: the largest
 * prompt and the metadata with worst-case JSON escaping (6 characters per
 * byte, `\u0001`), and MAX_BODY_BYTES for everything else (URLs, fields).
 */
export function generationBodyBytes(limits: ValidationLimits, edge: EdgeLimits): number {
  const images = 4 * Math.ceil(limits.maxInputBytes / 3);
  const prompt = Math.max(limits.maxPromptBytes.image, limits.maxPromptBytes.video, limits.maxPromptBytes.text);
  return images + 6 * (prompt + limits.metadata.maxTotalBytes) + edge.maxBodyBytes;
}

export interface BodyRoute {
  /** What a caller needs before its body is read. */
  readonly credential: Credential;
  /** Where the key travels: `authorization: Bearer` (platform, admin) or `x-vendor-api-key` / `?key=` (vendor). */
  readonly keyFrom: "platform" | "vendor";
  /** Whether the body may carry inline input images (the generation limit) or not (MAX_BODY_BYTES). */
  readonly images: boolean;
}

export interface BodyGuardOptions {
  readonly headerCheck: HeaderCheck;
  readonly uploadSlots: UploadSlots;
  readonly edge: EdgeLimits;
  /** See generationBodyBytes. */
  readonly generationBodyBytes: number;
}

/** Makes the options of one route that takes a body. */
export type BodyGuard = ReturnType<typeof bodyGuard>;

/**
 * Route options for every route that takes a body: `bodyLimit`, and an
 * onRequest hook that decides from the headers alone, before a byte of the
 * body is read: the credential (401), the announced size (422
 * input_too_large), and for a large upload (more than LARGE_UPLOAD_BYTES
 * announced, or chunked where images may come) one of the process's upload
 * slots (429 too_many_uploads with Retry-After), held until the response
 * ends or the client goes away. The readiness gate (503) runs before it.
 */
export function bodyGuard(options: BodyGuardOptions) {
  const { edge, uploadSlots } = options;
  return (route: BodyRoute) => {
    const bodyLimit = route.images ? options.generationBodyBytes : edge.maxBodyBytes;
    const headersOf = route.keyFrom === "vendor" ? vendorHeaders : platformHeaders;
    const onRequest = async (request: FastifyRequest, reply: FastifyReply) => {
      try {
        await options.headerCheck(headersOf(request), route.credential);
      } catch (error) {
        return refuse(request, reply, error);
      }
      const announced = announcedLength(request);
      if (announced !== undefined && announced > bodyLimit) return refuse(request, reply, bodyTooLarge(bodyLimit));
      const chunked = announced === undefined && request.headers["transfer-encoding"] !== undefined;
      if ((announced ?? 0) > edge.largeUploadBytes || (chunked && route.images)) {
        const release = uploadSlots.tryTake();
        if (!release) {
          return refuse(request, reply, new GatewayError(
            429, "too_many_uploads",
            `all ${uploadSlots.capacity} slots for large uploads (bodies over ${sizeText(edge.largeUploadBytes)}) are taken; retry shortly`,
            UPLOAD_RETRY_AFTER_SECONDS,
          ));
        }
        // 'close' follows the end of every response, and a client that went away.
        reply.raw.once("close", release);
      }
    };
    return { bodyLimit, onRequest };
  };
}

function announcedLength(request: FastifyRequest): number | undefined {
  const header = request.headers["content-length"];
  return header === undefined ? undefined : Number(header);
}

function refuse(request: FastifyRequest, reply: FastifyReply, error: unknown) {
  lingerUntilDiscarded(request, reply);
  return replyWithError(error, request, reply);
}

/**
 * Node keeps a refused request's connection and discards the body the client
 * goes on sending (its `_dump` when the answer has been sent), so the client
 * reads the answer: closing at once would reset the connection under it.
 * That discarding is bounded here: past LINGER_BYTES or LINGER_MS the
 * connection is closed. Watched by polling the socket's byte count: Node
 * drops a discarded body before any listener sees it, and a 'data' listener
 * on the socket would change how Node reads it.
 */
function lingerUntilDiscarded(request: FastifyRequest, reply: FastifyReply): void {
  const incoming = request.raw;
  if (incoming.complete || (request.headers["content-length"] === undefined && request.headers["transfer-encoding"] === undefined)) return;
  reply.raw.once("finish", () => {
    if (incoming.complete) return;
    const socket = incoming.socket;
    const startedAt = Date.now();
    const readBefore = socket.bytesRead;
    const watch = setInterval(() => {
      if (incoming.complete || socket.destroyed) clearInterval(watch);
      else if (socket.bytesRead - readBefore > LINGER_BYTES || Date.now() - startedAt > LINGER_MS) {
        clearInterval(watch);
        socket.destroy();
      }
    }, LINGER_POLL_MS);
    watch.unref();
  });
}
