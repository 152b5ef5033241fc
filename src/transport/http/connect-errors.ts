import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";

/** Fallback when an error carries no detail (Connect's own code → HTTP table, with 422 for invalid arguments). */
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

export interface HttpError {
  readonly status: number;
  readonly reason: string;
  readonly message: string;
  readonly code: Code;
  readonly retryAfterSeconds?: number;
}

/** Reads the status and reason the core attached; hides internal messages. */
export function httpErrorOf(error: unknown): HttpError {
  const connectError = ConnectError.from(error);
  const detail = connectError.findDetails(ErrorDetailSchema)[0];
  const status = detail?.httpStatus || STATUS_BY_CODE[connectError.code] || 500;
  const internal = status >= 500 && !detail;
  return {
    status,
    code: connectError.code,
    reason: detail?.reason || (internal ? "internal_error" : Code[connectError.code]!.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase()),
    message: internal ? "internal error" : connectError.rawMessage,
    retryAfterSeconds: detail?.retryAfterSeconds || undefined,
  };
}

/** The canonical status names the vendor puts in error.status. */
export const CANONICAL_STATUS: Record<Code, string> = {
  [Code.Canceled]: "CANCELLED",
  [Code.Unknown]: "UNKNOWN",
  [Code.InvalidArgument]: "INVALID_ARGUMENT",
  [Code.DeadlineExceeded]: "DEADLINE_EXCEEDED",
  [Code.NotFound]: "NOT_FOUND",
  [Code.AlreadyExists]: "ALREADY_EXISTS",
  [Code.PermissionDenied]: "PERMISSION_DENIED",
  [Code.ResourceExhausted]: "RESOURCE_EXHAUSTED",
  [Code.FailedPrecondition]: "FAILED_PRECONDITION",
  [Code.Aborted]: "ABORTED",
  [Code.OutOfRange]: "OUT_OF_RANGE",
  [Code.Unimplemented]: "UNIMPLEMENTED",
  [Code.Internal]: "INTERNAL",
  [Code.Unavailable]: "UNAVAILABLE",
  [Code.DataLoss]: "DATA_LOSS",
  [Code.Unauthenticated]: "UNAUTHENTICATED",
};
