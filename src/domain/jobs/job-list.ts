import { findModel } from "../catalog/models.js";
import { badRequest } from "../errors/domain-error.js";
import type { Job, JobStatus } from "./job.js";
import { publicState } from "./job-state-machine.js";
import { invalidPageToken, readPageToken, signPageToken, type TokenScope } from "../paging/page-token.js";

/**
 * The rules of listing an account's jobs (GET /api/v1/jobs, ListJobs): page
 * size bounds, filters, and the page token. Jobs are ordered newest first by
 * (created_at, job_id), both descending; a page continues strictly below the
 * last job of the previous page, so jobs created while a client pages never
 * shift it (they are newer than every cursor) and nothing is listed twice.
 */

export const LIST_LIMIT = { min: 1, max: 100, default: 20 } as const;

export const LISTED_STATUSES: readonly JobStatus[] = ["queued", "processing", "done", "failed", "canceled"];

/** Where a page ends: the last job listed (the next page starts strictly below it). */
export interface JobCursor {
  readonly createdAt: Date;
  readonly jobId: string;
}

/** The filters of a listing; a page token is valid only with the filters it was issued for. */
export interface JobListFilters {
  readonly status?: JobStatus;
  /** The catalog id (an alias is resolved). */
  readonly model?: string;
  /** Exclusive bounds on created_at. */
  readonly createdAfter?: Date;
  readonly createdBefore?: Date;
}

/** What a store is asked for: one page of one account's jobs. */
export interface JobListQuery extends JobListFilters {
  readonly accountId: string;
  readonly limit: number;
  /** Only jobs strictly older than this position. */
  readonly after?: JobCursor;
}

/** A listing request as it arrives (the transports' types stay out of the domain). */
export interface JobListInput {
  readonly status?: string;
  readonly model?: string;
  readonly createdAfter?: Date;
  readonly createdBefore?: Date;
  readonly limit?: number;
  readonly pageToken?: string;
}

const TOKEN_VERSION = 1;
const JOB_ID = /^[0-9a-f-]{1,64}$/;

/** `shown` is how the value arrived, for the message (a query's text, say). */
export function checkLimit(limit: number | undefined, shown = String(limit)): number {
  if (limit === undefined) return LIST_LIMIT.default;
  if (!Number.isInteger(limit) || limit < LIST_LIMIT.min || limit > LIST_LIMIT.max) {
    throw badRequest("invalid_limit", `limit must be an integer from ${LIST_LIMIT.min} to ${LIST_LIMIT.max} (got ${shown})`, { field: "limit" });
  }
  return limit;
}

export function checkStatus(status: string | undefined): JobStatus | undefined {
  if (status === undefined) return undefined;
  if (!(LISTED_STATUSES as readonly string[]).includes(status)) {
    throw badRequest("invalid_status", `status must be one of ${LISTED_STATUSES.join(", ")} (got "${status}")`, { field: "status" });
  }
  return status as JobStatus;
}

function checkModel(model: string | undefined): string | undefined {
  if (model === undefined) return undefined;
  const spec = findModel(model);
  if (!spec) throw badRequest("invalid_model", `model "${model}" is not a model of this service (see GET /api/v1/models)`, { field: "model" });
  return spec.id;
}

/**
 * No maximum span: stores find an account's jobs from its newest down without
 * visiting empty time (Cassandra keeps a directory of the days that hold jobs),
 * so a wide range costs no more than a narrow one. An inverted range is refused.
 */
function checkRange(after: Date | undefined, before: Date | undefined): void {
  for (const [field, date] of [["created_after", after], ["created_before", before]] as const) {
    if (date !== undefined && Number.isNaN(date.getTime())) throw badRequest("invalid_time_range", `${field} is not a valid time`, { field });
  }
  if (after !== undefined && before !== undefined && after.getTime() > before.getTime()) {
    throw badRequest("invalid_time_range", "created_after must not be later than created_before", { field: "created_after" });
  }
}

/** The filters and page size of a request, checked; the token is read by parseJobListQuery. */
export function checkJobListInput(input: JobListInput): { filters: JobListFilters; limit: number } {
  const limit = checkLimit(input.limit);
  const status = checkStatus(input.status);
  const model = checkModel(input.model);
  checkRange(input.createdAfter, input.createdBefore);
  return { filters: { status, model, createdAfter: input.createdAfter, createdBefore: input.createdBefore }, limit };
}

/** The filters as one string, so a token can be bound to them. */
function filtersKey(filters: JobListFilters): string {
  const time = (date: Date | undefined) => (date === undefined ? "" : String(date.getTime()));
  return [filters.status ?? "", filters.model ?? "", time(filters.createdAfter), time(filters.createdBefore)].join("\n");
}

const scopeOf = (accountId: string, filters: JobListFilters): TokenScope => ({
  purpose: "job-list-page-token", accountId, filters: filtersKey(filters),
});

/** An opaque token for the page after `cursor`, valid only for this account and these filters. */
export function encodePageToken(secret: Buffer, accountId: string, filters: JobListFilters, cursor: JobCursor): string {
  return signPageToken(secret, scopeOf(accountId, filters), [TOKEN_VERSION, cursor.createdAt.getTime(), cursor.jobId]);
}

/** Reads a token issued by encodePageToken for this account and these filters; anything else is invalid_page_token. */
export function decodePageToken(secret: Buffer, accountId: string, filters: JobListFilters, token: string): JobCursor {
  const fields = readPageToken(secret, scopeOf(accountId, filters), token);
  if (fields.length !== 3 || fields[0] !== TOKEN_VERSION) throw invalidPageToken("it has an unknown format");
  const [, millis, jobId] = fields as [number, unknown, unknown];
  if (!Number.isSafeInteger(millis) || typeof jobId !== "string" || !JOB_ID.test(jobId)) throw invalidPageToken("it has an unknown format");
  const createdAt = new Date(millis as number);
  if (Number.isNaN(createdAt.getTime())) throw invalidPageToken("it has an unknown format");
  return { createdAt, jobId };
}

/** A listing request, checked and resolved into a store query (the token checked last: it is bound to the filters). */
export function parseJobListQuery(secret: Buffer, accountId: string, input: JobListInput): JobListQuery {
  const { filters, limit } = checkJobListInput(input);
  const after = input.pageToken ? decodePageToken(secret, accountId, filters, input.pageToken) : undefined;
  return { ...filters, accountId, limit, after };
}

/**
 * Whether a job is within a query's filters and below its cursor: the order
 * and the filters every store implements. The status filter is on the status
 * clients see (publicState: decided but not yet settled is still processing).
 */
export function inListing(job: Job, query: JobListQuery): boolean {
  const created = job.createdAt.getTime();
  return (
    job.accountId === query.accountId &&
    (query.status === undefined || publicState(job).status === query.status) &&
    (query.model === undefined || job.model === query.model) &&
    (query.createdAfter === undefined || created > query.createdAfter.getTime()) &&
    (query.createdBefore === undefined || created < query.createdBefore.getTime()) &&
    (query.after === undefined || compareNewestFirst({ createdAt: job.createdAt, jobId: job.id }, query.after) > 0)
  );
}

/** Newest first: negative when `a` comes before `b` (created later, or at the same instant with the greater id). */
export function compareNewestFirst(a: JobCursor, b: JobCursor): number {
  const byTime = b.createdAt.getTime() - a.createdAt.getTime();
  if (byTime !== 0) return byTime;
  return a.jobId < b.jobId ? 1 : a.jobId > b.jobId ? -1 : 0;
}

/**
 * The position every listed job is strictly below: the cursor or
 * created_before, whichever is older. created_before is the position
 * (created_before, ""): no id sorts below "" at the same instant, so it is exclusive.
 */
export function upperBound(query: Pick<JobListQuery, "after" | "createdBefore">): JobCursor | undefined {
  const before = query.createdBefore === undefined ? undefined : { createdAt: query.createdBefore, jobId: "" };
  if (query.after === undefined || before === undefined) return query.after ?? before;
  return compareNewestFirst(query.after, before) > 0 ? query.after : before;
}
