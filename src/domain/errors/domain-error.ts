/**
 * Every refusal of the service is a DomainError: a category (which decides
 * the RPC code) and a stable snake_case reason (which clients read); each
 * edge answers its own status from the two (the statuses below are REST's).
 */
export type ErrorCategory =
  | "invalid" // 422 on REST: the request breaks a documented rule
  | "bad_request" // 400: malformed, or a rule the spec maps to 400
  | "unauthenticated" // 401
  | "permission_denied" // 403
  | "not_found" // 404
  | "insufficient_funds" // 402
  | "conflict" // 409: the same idempotency key is still being accepted
  | "already_finished" // 409: the job ended before the change asked of it (a cancel of a finished job)
  | "rate_limited" // 429: too much at once from this caller (queued jobs, uploads); retry after a while
  | "unavailable" // 503: paused, retry later
  | "upstream_failure" // 502: storage or upstream broke while accepting
  | "internal";

export class DomainError extends Error {
  constructor(
    readonly category: ErrorCategory,
    readonly reason: string,
    message: string,
    readonly facts: Record<string, string | number | boolean> = {},
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = "DomainError";
  }
}

export const invalid = (reason: string, message: string, facts?: Record<string, string | number | boolean>) =>
  new DomainError("invalid", reason, message, facts);

export const badRequest = (reason: string, message: string, facts?: Record<string, string | number | boolean>) =>
  new DomainError("bad_request", reason, message, facts);
