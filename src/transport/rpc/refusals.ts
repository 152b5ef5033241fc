import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { DomainError, type Readiness, toConnectError } from "../../core/index.js";
import { httpStatusOf } from "../http/error-replies.js";

const typeNameOf = (detail: ConnectError["details"][number]) => ("desc" in detail ? detail.desc.typeName : detail.type);

/** A failure with its ErrorDetail's deprecated `http_status` filled from REST's table, for the clients that still read it. */
export function withHttpStatus<E>(error: E): E {
  if (!(error instanceof ConnectError)) return error;
  const [detail] = error.findDetails(ErrorDetailSchema);
  if (!detail) return error;
  const httpStatus = httpStatusOf(error.code, detail.reason);
  if (detail.httpStatus === httpStatus) return error;
  // A new array: a forwarded failure may share its details with the one it was received as.
  error.details = error.details.map((each) =>
    typeNameOf(each) === ErrorDetailSchema.typeName ? { desc: ErrorDetailSchema, value: create(ErrorDetailSchema, { ...detail, httpStatus }) } : each,
  );
  return error;
}

// The edge's refusals leave before the interceptors, so each fills its http_status itself.
const refusal = (error: DomainError) => withHttpStatus(toConnectError(error));

/** UNAVAILABLE service_unavailable (503, retry-after) while the process cannot serve. */
export function notServing(readiness: Readiness): ConnectError {
  const why = readiness.current.reason ?? "service unavailable";
  return refusal(new DomainError("unavailable", "service_unavailable", why, {}, readiness.retryAfterSeconds));
}

/** INVALID_ARGUMENT input_too_large (422): the message's length prefix (or Content-Length) is over the method's limit. */
export function messageTooLarge(method: string, limit: number, size: number): ConnectError {
  const why = `the request message of ${method} is ${size} bytes or more; the limit is ${limit} bytes`;
  return refusal(new DomainError("invalid", "input_too_large", why, { limit, method }));
}

/** RESOURCE_EXHAUSTED too_many_uploads (429, retry-after): every large-upload slot of the process is taken. */
export const tooManyUploads = (retryAfterSeconds: number) =>
  refusal(new DomainError("rate_limited", "too_many_uploads", "too many large uploads at once; retry shortly", {}, retryAfterSeconds));

/** UNAVAILABLE server_busy (503, retry-after): the messages being received already hold MAX_BODY_MEMORY. */
export const bodyMemoryFull = (retryAfterSeconds: number) => refusal(
  new DomainError("unavailable", "server_busy", "too many request messages are being received at once; retry shortly", {}, retryAfterSeconds),
);

/** INVALID_ARGUMENT malformed_message (400): the message is not the method's protobuf. */
export const malformedMessage = (method: string) =>
  refusal(new DomainError("bad_request", "malformed_message", `the request message is not a valid ${method} request`, { method }));

/** DEADLINE_EXCEEDED request_timeout (408): the message did not arrive within HTTP_REQUEST_TIMEOUT (no domain category has this code). */
export function requestTimedOut(timeoutMs: number): ConnectError {
  const detail = create(ErrorDetailSchema, { reason: "request_timeout", facts: { limit_ms: timeoutMs } });
  const why = `the request message did not arrive within ${timeoutMs} ms`;
  return withHttpStatus(new ConnectError(why, Code.DeadlineExceeded, undefined, [{ desc: ErrorDetailSchema, value: detail }]));
}

/** INTERNAL invalid_message_flags (400): gRPC's PROTOCOL-HTTP2 requires INTERNAL for a bad envelope flag, but it is the caller's fault. */
export function invalidMessageFlags(flags: number, encoding: string | undefined): ConnectError {
  const why = flags === 1
    ? `the request message is flagged compressed but no message encoding is declared${encoding ? ` (${encoding})` : ""}`
    : `the request message's flags are 0x${flags.toString(16).padStart(2, "0")}; only 0 and 1 (compressed) are defined`;
  return refusal(new DomainError("internal", "invalid_message_flags", why, { flags }));
}

/** INTERNAL answers that are the caller's fault (the protocol says INTERNAL, REST's table a 4xx), not crashes to log. */
export const isCallerFault = (error: ConnectError) => httpStatusOf(error.code, error.findDetails(ErrorDetailSchema)[0]?.reason) < 500;

/** Anything else that went wrong in the edge's own checks (a crash): its message stays out of the wire. */
export const edgeFailure = (cause: unknown) => new ConnectError("internal error", Code.Internal, undefined, undefined, cause);
