import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { DomainError, type ErrorCategory } from "../../domain/errors/domain-error.js";

/** Category → (RPC code, the spec's HTTP status). The one table of this mapping. */
const BY_CATEGORY: Record<ErrorCategory, { code: Code; http: number }> = {
  invalid: { code: Code.InvalidArgument, http: 422 },
  bad_request: { code: Code.InvalidArgument, http: 400 },
  unauthenticated: { code: Code.Unauthenticated, http: 401 },
  permission_denied: { code: Code.PermissionDenied, http: 403 },
  not_found: { code: Code.NotFound, http: 404 },
  insufficient_funds: { code: Code.FailedPrecondition, http: 402 },
  conflict: { code: Code.Aborted, http: 409 },
  unavailable: { code: Code.Unavailable, http: 503 },
  upstream_failure: { code: Code.Unavailable, http: 502 },
  internal: { code: Code.Internal, http: 500 },
};

export function toConnectError(error: DomainError): ConnectError {
  const { code, http } = BY_CATEGORY[error.category];
  const detail = create(ErrorDetailSchema, {
    reason: error.reason,
    retryAfterSeconds: error.retryAfterSeconds ?? 0,
    facts: error.facts,
    httpStatus: http,
  });
  return new ConnectError(error.message, code, undefined, [{ desc: ErrorDetailSchema, value: detail }], error);
}

/** Wraps a handler so every DomainError leaves as a ConnectError with its detail. */
export async function rpc<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof DomainError) throw toConnectError(error);
    throw error;
  }
}
