import { badRequest } from "../errors/domain-error.js";
import { checkLimit } from "../jobs/job-list.js";
import { boundedRange } from "../ledger/statement.js";
import { invalidPageToken, readPageToken, signPageToken, type TokenScope } from "../paging/page-token.js";

/**
 * The rules of an audit listing (ListAuditEvents): page size 1–100 (default 20), a range [from, to) of at most
 * MAX_AUDIT_DAYS (default: the last DEFAULT_AUDIT_DAYS), optional filters, and a signed cursor bound to all of them.
 * The range is bounded because a store may read one partition per day of it (Cassandra).
 */
export const DEFAULT_AUDIT_DAYS = 31;
export const MAX_AUDIT_DAYS = 92;
const DAY_MS = 86_400_000;
const TOKEN_VERSION = 1;
const FILTER_MAX = 200;

/** Where a page ended: the next page is strictly older than this event. */
export interface AuditCursor {
  readonly at: Date;
  readonly eventId: string;
}

export interface AuditInput {
  readonly limit?: number;
  readonly pageToken?: string;
  readonly from?: Date;
  readonly to?: Date;
  readonly accountId?: string;
  readonly actor?: string;
  readonly kind?: string;
}

export interface AuditQuery {
  readonly limit: number;
  readonly from: Date;
  readonly to: Date;
  readonly accountId?: string;
  readonly actor?: string;
  readonly kind?: string;
  readonly before?: AuditCursor;
}

/** A token is bound to the filters as given; it carries the range as resolved for the first page (the next pages keep it). */
const scopeOf = (input: AuditInput): TokenScope => ({
  purpose: "audit-page-token",
  accountId: input.accountId ?? "",
  filters: [input.from?.getTime() ?? "", input.to?.getTime() ?? "", input.actor ?? "", input.kind ?? ""].join("\n"),
});

export function encodeAuditToken(secret: Buffer, input: AuditInput, query: AuditQuery, cursor: AuditCursor): string {
  const fields = [TOKEN_VERSION, cursor.at.getTime(), cursor.eventId, query.from.getTime(), query.to.getTime()];
  return signPageToken(secret, scopeOf(input), fields);
}

function filterOf(field: string, value: string | undefined): string | undefined {
  if (value === undefined || value === "") return undefined;
  if (value.length > FILTER_MAX) throw badRequest("field_too_long", `${field} is longer than ${FILTER_MAX} characters`, { field });
  return value;
}

/** A listing request, checked and resolved against `now` (the token last: it is bound to the rest). */
export function parseAuditQuery(secret: Buffer, input: AuditInput, now: Date): AuditQuery {
  const limit = checkLimit(input.limit);
  const { from, to } = boundedRange(input, now, DEFAULT_AUDIT_DAYS, MAX_AUDIT_DAYS, "an audit listing");
  const resolved = {
    limit, from, to,
    accountId: filterOf("account_id", input.accountId), actor: filterOf("actor", input.actor), kind: filterOf("kind", input.kind),
  };
  if (!input.pageToken) return resolved;
  const fields = readPageToken(secret, scopeOf(input), input.pageToken);
  const [version, millis, eventId, fromMs, toMs] = fields;
  const times = [millis, fromMs, toMs].every((value) => Number.isSafeInteger(value));
  if (fields.length !== 5 || version !== TOKEN_VERSION || !times || typeof eventId !== "string") throw invalidPageToken("it has an unknown format");
  return { ...resolved, from: new Date(fromMs as number), to: new Date(toMs as number), before: { at: new Date(millis as number), eventId } };
}

/** The UTC days [from, to) touches, newest first ("YYYY-MM-DD"): the partitions a day-bucketed store reads. */
export function auditDays(from: Date, to: Date): string[] {
  const days: string[] = [];
  const last = to.getTime() - 1;
  for (let day = Math.floor(last / DAY_MS) * DAY_MS; day >= Math.floor(from.getTime() / DAY_MS) * DAY_MS; day -= DAY_MS) {
    days.push(new Date(day).toISOString().slice(0, 10));
  }
  return days;
}

/** What a listing filters and orders records by. */
export interface AuditKeyed {
  readonly at: Date;
  readonly eventId: string;
  readonly kind: string;
  readonly actor: string;
  readonly accountId?: string;
}

/** Newest first: later `at`, then the greater id (the order every adapter lists in). */
export const newerFirst = (a: AuditKeyed, b: AuditKeyed) => b.at.getTime() - a.at.getTime() || (a.eventId < b.eventId ? 1 : a.eventId > b.eventId ? -1 : 0);

/** Whether a record is in the query's range, filters and below its cursor. */
export function auditMatches(record: AuditKeyed, query: AuditQuery): boolean {
  const at = record.at.getTime();
  if (at < query.from.getTime() || at >= query.to.getTime()) return false;
  if (query.accountId !== undefined && record.accountId !== query.accountId) return false;
  if (query.actor !== undefined && record.actor !== query.actor) return false;
  if (query.kind !== undefined && record.kind !== query.kind) return false;
  const before = query.before;
  return !before || at < before.at.getTime() || (at === before.at.getTime() && record.eventId < before.eventId);
}

