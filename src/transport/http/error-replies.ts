import type { FastifyError, FastifyReply } from "fastify";
import { Code } from "@connectrpc/connect";
import { CANONICAL_STATUS, httpErrorOf, type HttpError } from "./connect-errors.js";
import { GatewayError } from "./gateway-error.js";

/** Fastify's own refusals, in our terms. */
function fromFastify(error: FastifyError): HttpError | undefined {
  const make = (status: number, reason: string, message: string, code: Code): HttpError => ({ status, reason, message, code });
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_JSON":
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return make(400, "invalid_json", `the body is not valid JSON: ${error.message}`, Code.InvalidArgument);
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      // Only a body far beyond every documented input limit (200 MiB of images) gets here: the spec's 422.
      return make(422, "input_too_large", "the request is larger than the 200 MiB input limit allows", Code.InvalidArgument);
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return make(415, "unsupported_media_type", "send the body as Content-Type: application/json", Code.InvalidArgument);
  }
  if (error instanceof SyntaxError) return make(400, "invalid_json", `the body is not valid JSON: ${error.message}`, Code.InvalidArgument);
  if (error.validation) return make(422, "validation_failed", error.message, Code.InvalidArgument);
  return undefined;
}

/** The RPC code (and so the vendor's canonical status) of the gateway's own refusals. */
const CODE_BY_STATUS: Record<number, Code> = {
  400: Code.InvalidArgument,
  403: Code.PermissionDenied,
  404: Code.NotFound,
  415: Code.InvalidArgument,
  422: Code.InvalidArgument,
};

export function toHttpError(error: unknown): HttpError {
  if (error instanceof GatewayError) {
    return { status: error.status, reason: error.reason, message: error.message, code: CODE_BY_STATUS[error.status] ?? Code.Unknown };
  }
  return fromFastify(error as FastifyError) ?? httpErrorOf(error);
}

function retryAfter(reply: FastifyReply, error: HttpError): void {
  if (error.retryAfterSeconds) reply.header("retry-after", String(error.retryAfterSeconds));
}

/** `/api/v1`, `/admin/v1`, `/files`: {"error": {"code": "<snake_case>", "message": "..."}}. */
export function sendPlatformError(reply: FastifyReply, error: HttpError) {
  retryAfter(reply, error);
  return reply.code(error.status).send({ error: { code: error.reason, message: error.message } });
}

/**
 * `/api/aimodel`: the vendor's shape {"error": {"code": <http>, "message", "status"}}, with an
 * ErrorInfo detail carrying our reason. An unknown model is the vendor's 404.
 */
export function vendorErrorBody(error: HttpError) {
  const status = error.reason === "unknown_model" ? 404 : error.status;
  const canonical = error.reason === "unknown_model" ? "NOT_FOUND" : CANONICAL_STATUS[error.code] ?? "UNKNOWN";
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
