import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { passThrough } from "../../shared/stream-step.js";
import { create } from "@bufbuild/protobuf";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { DomainError, type ErrorCategory } from "../../domain/errors/domain-error.js";
import { isDependencyUnavailable } from "../../ports/dependency.js";
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from "../health/readiness.js";

/** Category → (RPC code, the spec's HTTP status). The one table of this mapping. */
const BY_CATEGORY: Record<ErrorCategory, { code: Code; http: number }> = {
  invalid: { code: Code.InvalidArgument, http: 422 },
  bad_request: { code: Code.InvalidArgument, http: 400 },
  unauthenticated: { code: Code.Unauthenticated, http: 401 },
  permission_denied: { code: Code.PermissionDenied, http: 403 },
  not_found: { code: Code.NotFound, http: 404 },
  insufficient_funds: { code: Code.FailedPrecondition, http: 402 },
  conflict: { code: Code.Aborted, http: 409 },
  already_finished: { code: Code.FailedPrecondition, http: 409 },
  rate_limited: { code: Code.ResourceExhausted, http: 429 },
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

/**
 * What leaves the core for an error: a DomainError with its detail; an
 * unreachable Cassandra, Kafka or SQLite as 503 service_unavailable with
 * Retry-After (an outage is an answer, not a crash); anything else as is
 * (Connect makes it Internal, and its message stays out of the wire).
 */
export function toRpcError(error: unknown): unknown {
  if (error instanceof DomainError) return toConnectError(error);
  if (isDependencyUnavailable(error)) {
    return toConnectError(
      new DomainError("unavailable", "service_unavailable", `${error.dependency} is unavailable; retry shortly`, { dependency: error.dependency },
        UNAVAILABLE_RETRY_AFTER_SECONDS),
    );
  }
  return error;
}

/** Wraps a handler so every refusal leaves as a ConnectError with its detail. */
export async function rpc<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw toRpcError(error);
  }
}

/**
 * The core's refusals leave every call as ConnectErrors with their detail
 * (toRpcError), whichever transport carried it: in the interceptors of the
 * ports' router and of the in-process transport alike.
 */
export const domainErrors: Interceptor = (next) => async (request) => {
  let response;
  try {
    response = await next(request);
  } catch (error) {
    throw toRpcError(error);
  }
  if (!response.stream) return response;
  return passThrough(response, {
    failure: toRpcError,
  });
};
