import { Code } from "@connectrpc/connect";
import { PROVIDER_FAILURES } from "../../core/index.js";

/**
 * The REST edge's one table from an error's RPC code and reason to its HTTP
 * status (the spec's section 7). The core answers codes and reasons only; the
 * status is decided here, for REST, for the `http_status` the RPC ports still
 * fill in ErrorDetail (deprecated), and for a gateway in front of a remote core alike.
 */

/** The status of each code, for a reason with none of its own (and for an error with no ErrorDetail). */
const STATUS_BY_CODE: Partial<Record<Code, number>> = {
  [Code.InvalidArgument]: 422,
  [Code.Unauthenticated]: 401,
  [Code.PermissionDenied]: 403,
  [Code.NotFound]: 404,
  [Code.FailedPrecondition]: 422,
  [Code.Aborted]: 409,
  [Code.AlreadyExists]: 409,
  [Code.ResourceExhausted]: 429,
  [Code.Unavailable]: 503,
  [Code.DeadlineExceeded]: 504,
  [Code.Unimplemented]: 501,
  [Code.Canceled]: 499,
};

const each = (reasons: readonly string[], status: number) => new Map(reasons.map((reason) => [reason, status]));

/**
 * Reasons whose status is not their code's: where one code covers refusals the
 * spec answers differently (INVALID_ARGUMENT: 422 a broken rule, 400 a
 * malformed request; FAILED_PRECONDITION: 402 money, 409 a finished job;
 * UNAVAILABLE: 503 paused or busy, 502 the upstream failed), and the RPC
 * edge's own refusals whose code is the protocol's.
 */
const STATUS_BY_REASON: Partial<Record<Code, ReadonlyMap<string, number>>> = {
  [Code.InvalidArgument]: each([
    "field_too_long", "invalid_group_by", "invalid_key_limit", "invalid_limit", "invalid_model", "invalid_page_size",
    "invalid_page_token", "invalid_status", "invalid_time_range", "invalid_wait", "malformed_message", "unsupported_field",
    "unsupported_media_type", "video_duration_requires_8s",
  ], 400),
  [Code.FailedPrecondition]: new Map([["insufficient_funds", 402], ["key_spend_limit_exceeded", 402], ["job_already_finished", 409]]),
  [Code.Unavailable]: each(["upstream_storage_failure", ...PROVIDER_FAILURES], 502),
  [Code.DeadlineExceeded]: each(["request_timeout"], 408),
  // gRPC makes a bad envelope flag INTERNAL; it is the caller's fault.
  [Code.Internal]: each(["invalid_message_flags"], 400),
};

/** The HTTP status of an error of `code` with `reason` (undefined: the error carries no ErrorDetail). */
export function httpStatusOf(code: Code, reason: string | undefined): number {
  const own = reason === undefined ? undefined : STATUS_BY_REASON[code]?.get(reason);
  return own ?? STATUS_BY_CODE[code] ?? 500;
}
