import { Code } from "@connectrpc/connect";

/** google.rpc.Code's documented HTTP status of each code: the vendor's table, and REST's where the spec agrees. */
export const GOOGLE_HTTP_STATUS: Record<Code, number> = {
  [Code.Canceled]: 499, [Code.Unknown]: 500, [Code.InvalidArgument]: 400, [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404, [Code.AlreadyExists]: 409, [Code.PermissionDenied]: 403, [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 400, [Code.Aborted]: 409, [Code.OutOfRange]: 400, [Code.Unimplemented]: 501,
  [Code.Internal]: 500, [Code.Unavailable]: 503, [Code.DataLoss]: 500, [Code.Unauthenticated]: 401,
};

/** REST's status of each code (the spec's section 7), for a reason with none of its own or no ErrorDetail. */
const REST_BY_CODE: Record<Code, number> = { ...GOOGLE_HTTP_STATUS, [Code.InvalidArgument]: 422, [Code.FailedPrecondition]: 422, [Code.OutOfRange]: 500 };

/** The reason lists the core declares, which the table reads (passed in: the panel reads them in the browser too). */
interface DeclaredReasons {
  readonly badRequest: readonly string[];
  readonly providerFailures: readonly string[];
}

/** REST's one table from code and reason to HTTP status: the reasons whose status is not their code's, then the code's. */
export function restStatusTable(reasons: DeclaredReasons): (code: Code, reason: string | undefined) => number {
  const each = (list: readonly string[], status: number) => new Map(list.map((reason) => [reason, status]));
  const byReason: Partial<Record<Code, ReadonlyMap<string, number>>> = {
    [Code.InvalidArgument]: each(reasons.badRequest, 400),
    [Code.FailedPrecondition]: new Map([["insufficient_funds", 402], ["key_spend_limit_exceeded", 402], ["job_already_finished", 409]]),
    [Code.Unavailable]: each(["upstream_storage_failure", ...reasons.providerFailures], 502),
    [Code.DeadlineExceeded]: each(["request_timeout"], 408),
    // gRPC makes a bad envelope flag INTERNAL; it is the caller's fault.
    [Code.Internal]: each(["invalid_message_flags"], 400),
  };
  return (code, reason) => (reason === undefined ? undefined : byReason[code]?.get(reason)) ?? REST_BY_CODE[code] ?? 500;
}
