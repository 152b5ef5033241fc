import { STATUS_CODES } from "node:http";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { BAD_REQUEST_REASONS, PROVIDER_FAILURES } from "../../core/index.js";
import { GOOGLE_HTTP_STATUS, restStatusTable } from "./error-status.js";
import { GatewayError } from "./gateway-error.js";

export interface HttpError {
  readonly status: number;
  readonly reason: string;
  readonly message: string;
  readonly code: Code;
  readonly retryAfterSeconds?: number;
  /** The request parameter at fault, when the gateway knows it. */
  readonly param?: string;
  /** The field the core's refusal names (its ErrorDetail's `facts.field`), in the request message's JSON names. */
  readonly field?: string;
}

/** REST's status of an error of `code` with `reason` (undefined: the error carries no ErrorDetail). */
export const httpStatusOf = restStatusTable({ badRequest: BAD_REQUEST_REASONS, providerFailures: PROVIDER_FAILURES });

/** A code's name in snake_case ("invalid_argument"), as the canonical names spell it. */
const codeName = (code: Code) => Code[code]!.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();

/** The REST answer to an error from the core (in process or remote): its status decided here, an internal message hidden. */
export function httpErrorOf(error: unknown): HttpError {
  const connectError = ConnectError.from(error);
  const detail = connectError.findDetails(ErrorDetailSchema)[0];
  const status = httpStatusOf(connectError.code, detail?.reason);
  const internal = status >= 500 && !detail;
  return {
    status,
    code: connectError.code,
    reason: detail?.reason || (internal ? "internal_error" : codeName(connectError.code)),
    message: internal ? "internal error" : connectError.rawMessage,
    retryAfterSeconds: detail?.retryAfterSeconds || undefined,
    field: typeof detail?.facts?.field === "string" ? detail.facts.field : undefined,
  };
}

/**
 * A refusal in OpenAI's terms when its field is one a translation made from a parameter of another name
 * (`params`: field → parameter): `param` names the parameter, and so does the message. Any other error is as it was.
 */
export function withOpenAiParam(error: unknown, params: ReadonlyMap<string, string>): unknown {
  const mapped = toHttpError(error);
  const param = mapped.field === undefined ? undefined : params.get(mapped.field);
  if (param === undefined) return error;
  return new GatewayError(mapped.status, mapped.reason, mapped.message.replaceAll(mapped.field!, param), mapped.retryAfterSeconds, param);
}

/** Everything under /api/aimodel answers in the vendor's error shape (but its OpenAI surface); everything else in the platform's. */
const isVendorPath = (url: string) => /^\/api\/aimodel(?:[/?]|$)/.test(url);
/** OpenAI's surface, where the vendor serves its own: under the vendor's prefix. */
const isOpenAiPath = (url: string) => /^\/api\/aimodel\/v1beta\/openai(?:[/?]|$)/.test(url);

/** "1 MiB", "273.4 MiB", "1000 bytes": how messages name a size limit. */
export function sizeText(bytes: number): string {
  const MIB = 1024 * 1024;
  if (bytes >= MIB) return `${Number((bytes / MIB).toFixed(1))} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

/** 422 input_too_large: the spec's answer to a body beyond what the endpoint accepts (the limit named). */
export const bodyTooLarge = (limitBytes: number) =>
  new GatewayError(422, "input_too_large", `the request body is larger than the ${sizeText(limitBytes)} this endpoint accepts`);

/** 415 unsupported_media_type: a body not sent as `application/json` (refused before it is read). */
export const unsupportedMediaType = () => new GatewayError(415, "unsupported_media_type", "send the body as Content-Type: application/json");

/** 404 not_found: no route takes this method and path (the path shown cut short, never the query). */
export function routeNotFound(request: FastifyRequest): GatewayError {
  const path = request.url.split("?")[0]!;
  const shown = path.length > 200 ? `${path.slice(0, 200)}…` : path;
  return new GatewayError(404, "not_found", `no route ${request.method} ${shown}`);
}

const codeOf = (error: unknown) => (error as { code?: unknown } | null)?.code;

const invalidJson = (error: Error) => new GatewayError(400, "invalid_json", `the body is not valid JSON: ${error.message}`);
const invalidUrl = () => new GatewayError(400, "invalid_url", "the URL's path is not valid percent-encoding");

/** Fastify's own refusals in our terms; never the URL or the query (which may hold `?key=`). */
function fastifyRefusal(error: FastifyError, bodyLimit: number | undefined): GatewayError | undefined {
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_JSON":
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return invalidJson(error);
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return bodyTooLarge(bodyLimit ?? 0);
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return unsupportedMediaType();
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new GatewayError(400, "invalid_content_length", "the body's length differs from its Content-Length");
    case "FST_ERR_BAD_URL":
      return invalidUrl();
  }
  if (error instanceof SyntaxError) return invalidJson(error);
  // A path parameter decoded once more by a route (e.g. `%25E0` → `%E0`).
  if (error instanceof URIError) return invalidUrl();
  if (error.validation) return validationFailed(error);
  // Any other refusal of the framework's (FST_ERR_*, 4xx): a fixed message, since its own may quote the request.
  if (typeof error.code === "string" && error.code.startsWith("FST_") && error.statusCode && error.statusCode < 500) {
    return new GatewayError(error.statusCode, "bad_request", "the request is malformed");
  }
  return undefined;
}

/**
 * 422 validation_failed naming the field at fault: Ajv's "must NOT have additional properties" does not say which,
 * so the property (params.additionalProperty of the documented FastifySchemaValidationError) is added to the message.
 */
function validationFailed(error: FastifyError): GatewayError {
  const first = error.validation?.[0];
  const extra = (first?.params as { additionalProperty?: unknown } | undefined)?.additionalProperty;
  if (first?.keyword === "additionalProperties" && typeof extra === "string") {
    const shown = extra.length > 100 ? `${extra.slice(0, 100)}…` : extra;
    return new GatewayError(422, "validation_failed", `${error.message}: "${shown}" is not a field of this request`);
  }
  return new GatewayError(422, "validation_failed", error.message);
}

/** The RPC code (and so the vendor's canonical status) of the gateway's own refusals; any other 4xx is INVALID_ARGUMENT. */
const CODE_BY_STATUS: Readonly<Record<number, Code>> = {
  401: Code.Unauthenticated, 403: Code.PermissionDenied, 404: Code.NotFound, 408: Code.DeadlineExceeded,
  429: Code.ResourceExhausted, 499: Code.Canceled, 503: Code.Unavailable,
};

/** An error as the gateway answers it: its own refusals and Fastify's as they are, anything else by the core's code and reason. */
export function toHttpError(error: unknown, bodyLimit?: number): HttpError {
  const refusal = error instanceof GatewayError ? error : fastifyRefusal(error as FastifyError, bodyLimit);
  if (!refusal) return httpErrorOf(error);
  const { status, reason, message, retryAfterSeconds, param } = refusal;
  return { status, reason, message, code: CODE_BY_STATUS[status] ?? (status < 500 ? Code.InvalidArgument : Code.Unknown), retryAfterSeconds, param };
}

/** Refusals of HTTP itself (408 late; 413, 414, 415, 431 unreadable): the vendor's front end answers them with HTTP's status. */
const HTTP_PROTOCOL_STATUSES: ReadonlySet<number> = new Set([408, 413, 414, 415, 431]);

/** The vendor's words for two reasons: an unknown model its NOT_FOUND, depleted credits its RESOURCE_EXHAUSTED. */
const VENDOR_CODE_BY_REASON: ReadonlyMap<string, Code> = new Map([["unknown_model", Code.NotFound], ["insufficient_funds", Code.ResourceExhausted]]);

/** The spec's 402 holds on every surface: money the balance or the key's spend limit cannot cover (no Retry-After: waiting does not help). */
const PAYMENT_REQUIRED: ReadonlySet<string> = new Set(["insufficient_funds", "key_spend_limit_exceeded"]);

/** The interactions endpoint creates a job: its validation failures are the spec's 422, as on /api/v1 (an unknown model stays 404). */
const isInteractions = (path: string) => /^\/api\/aimodel\/[^/?]+\/interactions(?:[/?]|$)/.test(path);

/**
 * The vendor surface's one table: the canonical code's status (our 422 is its 400 INVALID_ARGUMENT, a failed upstream
 * its 503), but HTTP's own refusals and the spec's 402 keep their status, and interactions its 422.
 */
function vendorStatusOf(error: HttpError, path: string): { status: number; canonical: string } {
  const code = VENDOR_CODE_BY_REASON.get(error.reason) ?? error.code;
  const own = HTTP_PROTOCOL_STATUSES.has(error.status) || PAYMENT_REQUIRED.has(error.reason) || (error.status === 422 && isInteractions(path) && code === error.code);
  return { status: own ? error.status : GOOGLE_HTTP_STATUS[code], canonical: code === Code.Canceled ? "CANCELLED" : codeName(code).toUpperCase() };
}

/** `/api/aimodel`: the vendor's shape {"error": {"code": <http>, "message", "status"}}, with an ErrorInfo carrying our reason. */
export function vendorErrorBody(error: HttpError, path: string) {
  const { status, canonical } = vendorStatusOf(error, path);
  const info = { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: error.reason.toUpperCase(), domain: "generation-service" };
  return { status, body: { error: { code: status, message: error.message, status: canonical, details: [info] } } };
}

/** OpenAI's `type` of each status it documents; any other 4xx is invalid_request_error, a 5xx server_error. */
const OPENAI_TYPES: Readonly<Record<number, string>> = {
  401: "authentication_error", 402: "insufficient_quota", 403: "permission_error", 409: "conflict_error", 429: "rate_limit_error",
};

/** OpenAI's {"error": {"message", "type", "param", "code"}}: REST's status, but validation is OpenAI's 400 and an unknown model its 404. */
export function openAiErrorBody(error: HttpError) {
  const status = error.reason === "unknown_model" ? 404 : error.status === 422 ? 400 : error.status;
  const type = OPENAI_TYPES[status] ?? (status >= 500 ? "server_error" : "invalid_request_error");
  return { status, body: { error: { message: error.message, type, param: error.param ?? null, code: error.reason } } };
}

/** The error in the shape of the surface `path` belongs to; `/api/v1`, `/admin/v1`, `/files`: {"error": {"code": "<snake_case>", "message"}}. */
function errorBody(path: string, error: HttpError) {
  if (isOpenAiPath(path)) return openAiErrorBody(error);
  if (isVendorPath(path)) return vendorErrorBody(error, path);
  return { status: error.status, body: { error: { code: error.reason, message: error.message } } };
}

/** Sends the error in the shape of the surface the request's path belongs to. */
export function sendError(reply: FastifyReply, error: HttpError) {
  const { status, body } = errorBody(reply.request.url, error);
  if (error.retryAfterSeconds) reply.header("retry-after", String(error.retryAfterSeconds));
  return reply.code(status).send(body);
}

/** A whole HTTP/1.1 answer for a raw socket (a refused connection, an unreadable or late request), then the connection closes. */
export function rawErrorResponse(path: string, refusal: GatewayError): string {
  const error = toHttpError(refusal);
  const { status, body } = errorBody(path, error);
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

/** Whether the request failed because its client hung up: nothing can be answered, and anyone can cause it at will. */
function clientWentAway(request: FastifyRequest, error: unknown): boolean {
  const code = codeOf(error);
  if (typeof code === "string" && GONE_CODES.has(code)) return true;
  // Anything else (a call canceled through the client's signal included) counts only once the connection is gone.
  const socket = request.raw.socket as { destroyed?: boolean } | null;
  return !socket || socket.destroyed === true;
}

/** The one way an error leaves the gateway, in its surface's shape; only a crash of this service is logged as an error. */
export function replyWithError(error: unknown, request: FastifyRequest, reply: FastifyReply) {
  const code = codeOf(error);
  if (clientWentAway(request, error)) {
    request.log.debug({ code: typeof code === "string" || typeof code === "number" ? code : undefined }, "client went away");
    return sendError(reply, toHttpError(new GatewayError(499, "client_closed_request", "the client closed the connection")));
  }
  const mapped = toHttpError(error, request.routeOptions.bodyLimit);
  // Refusals (503 paused, 502 upstream) are answers, not failures of this service: only crashes are logged as errors.
  if (mapped.reason === "internal_error") request.log.error({ err: error }, "request failed");
  return sendError(reply, mapped);
}
