import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { passThrough } from "../../shared/stream-step.js";
import { create } from "@bufbuild/protobuf";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { DomainError, type ErrorCategory } from "../../domain/errors/domain-error.js";
import { isDependencyUnavailable } from "../../ports/dependency.js";
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from "../health/readiness.js";

/**
 * Category → RPC code: the one table of it. The core answers a code and a
 * reason; each edge decides its own status from them (REST's table:
 * transport/http/error-status.ts), so no HTTP status is chosen here.
 */
const CODE_BY_CATEGORY: Record<ErrorCategory, Code> = {
  invalid: Code.InvalidArgument,
  bad_request: Code.InvalidArgument,
  unauthenticated: Code.Unauthenticated,
  permission_denied: Code.PermissionDenied,
  not_found: Code.NotFound,
  insufficient_funds: Code.FailedPrecondition,
  conflict: Code.Aborted,
  already_finished: Code.FailedPrecondition,
  rate_limited: Code.ResourceExhausted,
  unavailable: Code.Unavailable,
  upstream_failure: Code.Unavailable,
  internal: Code.Internal,
};

export function toConnectError(error: DomainError): ConnectError {
  const detail = create(ErrorDetailSchema, {
    reason: error.reason,
    retryAfterSeconds: error.retryAfterSeconds ?? 0,
    facts: error.facts,
  });
  return new ConnectError(error.message, CODE_BY_CATEGORY[error.category], undefined, [{ desc: ErrorDetailSchema, value: detail }], error);
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
