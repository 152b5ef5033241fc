import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { httpStatusOf } from "./error-status.js";

export interface HttpError {
  readonly status: number;
  readonly reason: string;
  readonly message: string;
  readonly code: Code;
  readonly retryAfterSeconds?: number;
}

/**
 * The REST answer to an error from the core (in process or remote): its
 * status decided here from its code and reason (httpStatusOf), never read
 * from the core; an internal message hidden.
 */
export function httpErrorOf(error: unknown): HttpError {
  const connectError = ConnectError.from(error);
  const detail = connectError.findDetails(ErrorDetailSchema)[0];
  const status = httpStatusOf(connectError.code, detail?.reason);
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
