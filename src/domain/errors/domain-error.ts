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

/** Every reason of `bad_request`, declared once: its code is `invalid`'s, so REST tells its 400 from 422 by this list. */
export const BAD_REQUEST_REASONS = [
  "field_too_long", "invalid_entry_source", "invalid_entry_type", "invalid_group_by", "invalid_key_limit", "invalid_limit", "invalid_model", "invalid_page_size",
  "invalid_page_token", "invalid_status", "invalid_time_range", "invalid_wait", "malformed_message", "unsupported_field",
  "unsupported_media_type", "video_duration_requires_8s",
] as const;

export type BadRequestReason = (typeof BAD_REQUEST_REASONS)[number];

export class DomainError<C extends ErrorCategory = ErrorCategory> extends Error {
  constructor(
    readonly category: C,
    readonly reason: C extends "bad_request" ? BadRequestReason : string,
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

export const badRequest = (reason: BadRequestReason, message: string, facts?: Record<string, string | number | boolean>) =>
  new DomainError("bad_request", reason, message, facts);
