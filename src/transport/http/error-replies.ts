import { STATUS_CODES } from "node:http";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { Code } from "@connectrpc/connect";
import { CANONICAL_STATUS, httpErrorOf, type HttpError } from "./connect-errors.js";
import { GatewayError } from "./gateway-error.js";

/** Everything under /api/aimodel answers in the vendor's error shape; everything else in the platform's. */
export const isVendorPath = (url: string) => /^\/api\/aimodel(?:[/?]|$)/.test(url);

/** "1 MiB", "273.4 MiB", "1000 bytes": how messages name a size limit. */
export function sizeText(bytes: number): string {
  const MIB = 1024 * 1024;
  if (bytes >= MIB) return `${Number((bytes / MIB).toFixed(1))} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

/** 422 input_too_large: the spec's answer to a body beyond what the endpoint accepts (the limit named). */
export function bodyTooLarge(limitBytes: number): GatewayError {
  return new GatewayError(422, "input_too_large", `the request body is larger than the ${sizeText(limitBytes)} this endpoint accepts`);
}

/** 415 unsupported_media_type: a body not sent as `application/json` (refused before it is read). */
export function unsupportedMediaType(): GatewayError {
  return new GatewayError(415, "unsupported_media_type", "send the body as Content-Type: application/json");
}

/** 404 not_found: no route takes this method and path (the path shown cut short, never the query). */
export function routeNotFound(request: FastifyRequest): GatewayError {
  const path = request.url.split("?")[0]!;
  const shown = path.length > 200 ? `${path.slice(0, 200)}…` : path;
  return new GatewayError(404, "not_found", `no route ${request.method} ${shown}`);
}

/** What Fastify's own refusals answer; never the URL or the query (which may hold `?key=`). */
function fromFastify(error: FastifyError, context: ErrorContext): HttpError | undefined {
  const make = (status: number, reason: string, message: string, code: Code): HttpError => ({ status, reason, message, code });
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_JSON":
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return make(400, "invalid_json", `the body is not valid JSON: ${error.message}`, Code.InvalidArgument);
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return toHttpError(bodyTooLarge(context.bodyLimit ?? 0));
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return toHttpError(unsupportedMediaType());
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return make(400, "invalid_content_length", "the body's length differs from its Content-Length", Code.InvalidArgument);
    case "FST_ERR_BAD_URL":
      return make(400, "invalid_url", "the URL's path is not valid percent-encoding", Code.InvalidArgument);
  }
  if (error instanceof SyntaxError) return make(400, "invalid_json", `the body is not valid JSON: ${error.message}`, Code.InvalidArgument);
  // A path parameter decoded once more by a route (e.g. `%25E0` → `%E0`).
  if (error instanceof URIError) return make(400, "invalid_url", "the URL's path is not valid percent-encoding", Code.InvalidArgument);
  if (error.validation) return make(422, "validation_failed", error.message, Code.InvalidArgument);
  // Any other refusal of the framework's (FST_ERR_*, 4xx): a fixed message, since its own may quote the request.
  if (typeof error.code === "string" && error.code.startsWith("FST_") && error.statusCode && error.statusCode < 500) {
    return make(error.statusCode, "bad_request", "the request is malformed", CODE_BY_STATUS[error.statusCode] ?? Code.InvalidArgument);
  }
  return undefined;
}

/** The RPC code (and so the vendor's canonical status) of the gateway's own refusals. */
const CODE_BY_STATUS: Record<number, Code> = {
  400: Code.InvalidArgument,
  401: Code.Unauthenticated,
  403: Code.PermissionDenied,
  404: Code.NotFound,
  408: Code.DeadlineExceeded,
  413: Code.InvalidArgument,
  414: Code.InvalidArgument,
  415: Code.InvalidArgument,
  422: Code.InvalidArgument,
  429: Code.ResourceExhausted,
  431: Code.InvalidArgument,
  499: Code.Canceled,
  503: Code.Unavailable,
};

/** What the route knew when the error happened, so messages can name the limit that was hit. */
export interface ErrorContext {
  readonly bodyLimit?: number;
}

export function toHttpError(error: unknown, context: ErrorContext = {}): HttpError {
  if (error instanceof GatewayError) {
    return {
      status: error.status,
      reason: error.reason,
      message: error.message,
      code: CODE_BY_STATUS[error.status] ?? Code.Unknown,
      retryAfterSeconds: error.retryAfterSeconds,
    };
  }
  return fromFastify(error as FastifyError, context) ?? httpErrorOf(error);
}

function retryAfter(reply: FastifyReply, error: HttpError): void {
  if (error.retryAfterSeconds) reply.header("retry-after", String(error.retryAfterSeconds));
}

/** `/api/v1`, `/admin/v1`, `/files`: {"error": {"code": "<snake_case>", "message": "..."}}. */
export function platformErrorBody(error: HttpError) {
  return { status: error.status, body: { error: { code: error.reason, message: error.message } } };
}

export function sendPlatformError(reply: FastifyReply, error: HttpError) {
  retryAfter(reply, error);
  const { status, body } = platformErrorBody(error);
  return reply.code(status).send(body);
}

/**
 * The HTTP status of each canonical code, as the vendor (and every Google
 * API) answers it: google.rpc.Code's documented HTTP mapping.
 */
export const VENDOR_HTTP_STATUS: Record<Code, number> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 400,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

/**
 * Refusals of HTTP itself, before any method of the API: the request did not
 * arrive in time (408), or could not be read as a request (413 chunk
 * extensions, 414 an over-long path parameter, 415 a body not sent as JSON,
 * 431 headers). They keep their HTTP status, with the closest canonical code
 * in the body, as the vendor's front end answers them with HTTP's own status.
 */
const HTTP_PROTOCOL_STATUSES: ReadonlySet<number> = new Set([408, 413, 414, 415, 431]);

/**
 * The one mapping of the vendor surface: an error's HTTP status and
 * canonical code (error.status). Everything an API method decides is
 * answered with its canonical code's HTTP status (so our 422 validation
 * failures are the vendor's 400 INVALID_ARGUMENT, an upstream failure is 503
 * UNAVAILABLE), except:
 *  - an unknown model is the vendor's 404 NOT_FOUND;
 *  - a balance that cannot cover the call (our 402 insufficient_funds) is
 *    429 RESOURCE_EXHAUSTED, what the vendor answers when prepaid credits are
 *    depleted (without Retry-After: waiting does not help, a top-up does).
 */
export function vendorStatusOf(error: HttpError): { status: number; canonical: string } {
  if (error.reason === "unknown_model") return { status: 404, canonical: "NOT_FOUND" };
  if (error.reason === "insufficient_funds") return { status: 429, canonical: "RESOURCE_EXHAUSTED" };
  const canonical = CANONICAL_STATUS[error.code] ?? "UNKNOWN";
  if (HTTP_PROTOCOL_STATUSES.has(error.status)) return { status: error.status, canonical };
  return { status: VENDOR_HTTP_STATUS[error.code] ?? 500, canonical };
}

/**
 * `/api/aimodel`: the vendor's shape {"error": {"code": <http>, "message", "status"}}, with an
 * ErrorInfo detail carrying our reason; status and code by vendorStatusOf.
 */
export function vendorErrorBody(error: HttpError) {
  const { status, canonical } = vendorStatusOf(error);
  return {
    status,
    body: {
      error: {
        code: status,
        message: error.message,
        status: canonical,
        details: [
          { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: error.reason.toUpperCase(), domain: "generation-service" },
        ],
      },
    },
  };
}

export function sendVendorError(reply: FastifyReply, error: HttpError) {
  retryAfter(reply, error);
  const { status, body } = vendorErrorBody(error);
  return reply.code(status).send(body);
}

/** The error in the shape of the surface the request's path belongs to. */
export function sendError(reply: FastifyReply, error: HttpError) {
  return isVendorPath(reply.request.url) ? sendVendorError(reply, error) : sendPlatformError(reply, error);
}

/**
 * A whole HTTP/1.1 answer for a raw socket (a refused connection, a request
 * the HTTP parser could not read, a request timeout): the error in the shape
 * of the surface `path` belongs to, then the connection closes.
 */
export function rawErrorResponse(path: string, error: HttpError): string {
  const { status, body } = isVendorPath(path) ? vendorErrorBody(error) : platformErrorBody(error);
  const json = JSON.stringify(body);
  return [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}`,
    "Content-Type: application/json; charset=utf-8",
    `Content-Length: ${Buffer.byteLength(json)}`,
    ...(error.retryAfterSeconds ? [`Retry-After: ${error.retryAfterSeconds}`] : []),
    "Connection: close",
    "",
    json,
  ].join("\r\n");
}

const GONE_CODES = new Set(["ECONNRESET", "ECONNABORTED", "EPIPE", "ERR_STREAM_PREMATURE_CLOSE", "ERR_STREAM_DESTROYED"]);

/**
 * Whether the request failed because its client hung up (mid-body or
 * mid-answer): nothing can be answered, and anyone can cause it at will, so
 * it is never worth more than a debug line.
 */
export function clientWentAway(request: FastifyRequest, error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" && GONE_CODES.has(code)) return true;
  // Anything else (a call canceled through the client's signal included) counts only once the connection is gone.
  const socket = request.raw.socket as { destroyed?: boolean } | null;
  return !socket || socket.destroyed === true;
}

/**
 * The one way an error leaves the gateway: in its surface's shape (by path),
 * the limit named when a body was too large, logged only when it is a fault
 * of this service (a crash: error with its stack); a client that went away is
 * a debug line without a stack.
 */
export function replyWithError(error: unknown, request: FastifyRequest, reply: FastifyReply) {
  if (clientWentAway(request, error)) {
    const code = (error as { code?: unknown } | null)?.code;
    request.log.debug({ code: typeof code === "string" || typeof code === "number" ? code : undefined }, "client went away");
    return sendError(reply, toHttpError(new GatewayError(499, "client_closed_request", "the client closed the connection")));
  }
  const tooLarge = (error as { code?: unknown } | null)?.code === "FST_ERR_CTP_BODY_TOO_LARGE";
  const mapped = toHttpError(error, tooLarge ? { bodyLimit: request.routeOptions.bodyLimit } : {});
  // Refusals (503 paused, 502 upstream) are answers, not failures of this service: only crashes are logged as errors.
  if (mapped.reason === "internal_error") request.log.error({ err: error }, "request failed");
  return sendError(reply, mapped);
}
