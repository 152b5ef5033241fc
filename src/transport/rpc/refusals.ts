import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { DomainError, type Readiness, toConnectError as coreError } from "../../core/index.js";
import { withHttpStatus } from "./http-status-detail.js";

/**
 * What the edge of the core answers before (or instead of) reading a call's
 * message, with the usual ErrorDetail. These leave before the interceptors
 * run, so each fills its deprecated http_status itself (withHttpStatus).
 */

const toConnectError = (error: DomainError) => withHttpStatus(coreError(error));

/** UNAVAILABLE service_unavailable (503, retry-after) while the process cannot serve. */
export function notServing(readiness: Readiness): ConnectError {
  const report = readiness.current;
  return toConnectError(
    new DomainError("unavailable", "service_unavailable", report.reason ?? "service unavailable", {}, readiness.retryAfterSeconds),
  );
}

/** INVALID_ARGUMENT input_too_large (422): the message's length prefix (or Content-Length) is over the method's limit. */
export function messageTooLarge(method: string, limit: number, size: number): ConnectError {
  return toConnectError(
    new DomainError("invalid", "input_too_large", `the request message of ${method} is ${size} bytes or more; the limit is ${limit} bytes`, {
      limit,
      method,
    }),
  );
}

/** RESOURCE_EXHAUSTED too_many_uploads (429, retry-after): every large-upload slot of the process is taken. */
export function tooManyUploads(retryAfterSeconds: number): ConnectError {
  return toConnectError(
    new DomainError("rate_limited", "too_many_uploads", "too many large uploads at once; retry shortly", {}, retryAfterSeconds),
  );
}

/**
 * UNAVAILABLE server_busy (503, retry-after): the request messages being
 * received already hold MAX_BODY_MEMORY between them (counted from their
 * length prefixes or Content-Length), so this one is not read.
 */
export function bodyMemoryFull(retryAfterSeconds: number): ConnectError {
  return toConnectError(
    new DomainError("unavailable", "server_busy", "too many request messages are being received at once; retry shortly", {}, retryAfterSeconds),
  );
}

/** INVALID_ARGUMENT malformed_message (400): the message is not the method's protobuf. */
export function malformedMessage(method: string): ConnectError {
  return toConnectError(new DomainError("bad_request", "malformed_message", `the request message is not a valid ${method} request`, { method }));
}

/**
 * DEADLINE_EXCEEDED request_timeout (HTTP 408): the request's message did not
 * arrive within HTTP_REQUEST_TIMEOUT. No domain category maps to it (it is
 * the edge's own refusal), so the detail is built here.
 */
export function requestTimedOut(timeoutMs: number): ConnectError {
  const detail = create(ErrorDetailSchema, { reason: "request_timeout", facts: { limit_ms: timeoutMs } });
  return withHttpStatus(new ConnectError(`the request message did not arrive within ${timeoutMs} ms`, Code.DeadlineExceeded, undefined, [
    { desc: ErrorDetailSchema, value: detail },
  ]));
}

/**
 * INTERNAL invalid_message_flags (HTTP 400: the caller's
 * fault): a request envelope flagged compressed with no encoding declared (or
 * identity), or flagged other than 0 or 1. gRPC's PROTOCOL-HTTP2 requires
 * INTERNAL (grpc-go answers the same); the message is never read as uncompressed.
 */
export function invalidMessageFlags(flags: number, encoding: string | undefined): ConnectError {
  const why = flags === 1
    ? `the request message is flagged compressed but no message encoding is declared${encoding ? ` (${encoding})` : ""}`
    : `the request message's flags are 0x${flags.toString(16).padStart(2, "0")}; only 0 and 1 (compressed) are defined`;
  const detail = create(ErrorDetailSchema, { reason: "invalid_message_flags", facts: { flags } });
  const error = withHttpStatus(new ConnectError(why, Code.Internal, undefined, [{ desc: ErrorDetailSchema, value: detail }]));
  CALLER_FAULTS.add(error);
  return error;
}

/** INTERNAL answers that are the caller's fault (the protocol says INTERNAL), not crashes to log. */
const CALLER_FAULTS = new WeakSet<ConnectError>();

export const isCallerFault = (error: unknown) => error instanceof ConnectError && CALLER_FAULTS.has(error);

/** UNIMPLEMENTED (as grpc-js and Connect answer it): a unary call sent two request messages, or none. */
export function unaryMessageCount(policy: { readonly service: { readonly typeName: string }; readonly method: { readonly name: string } }, what: string): ConnectError {
  return new ConnectError(`protocol error: ${what} for unary method /${policy.service.typeName}/${policy.method.name}`, Code.Unimplemented);
}

/** Anything else that went wrong in the edge's own checks (a crash): its message stays out of the wire. */
export function edgeFailure(cause: unknown): ConnectError {
  return new ConnectError("internal error", Code.Internal, undefined, undefined, cause);
}
