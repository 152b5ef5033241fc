import { findModel } from "../catalog/models.js";
import { badRequest } from "../errors/domain-error.js";
import { checkLimit } from "../jobs/job-list.js";
import { invalidPageToken, readPageToken, signPageToken, type TokenScope } from "../paging/page-token.js";

/**
 * The rules of an account statement (GET /api/v1/ledger, ListLedgerEntries):
 * page size 1–100 (default 20, as job listings), an optional time range
 * [from, to), optional filters (types, model, key, source), and a signed
 * cursor bound to the account, the range and the filters. Entries are newest
 * first; a page continues strictly below the previous page's last.
 */

export const STATEMENT_ENTRY_TYPES = ["credit", "hold", "charge", "release", "adjustment"] as const;
export const STATEMENT_SOURCES = ["job", "text_call"] as const;
export type StatementSource = (typeof STATEMENT_SOURCES)[number];

/** Which entries a statement lists; every filter set must match. */
export interface StatementFilter {
  readonly types?: readonly string[];
  /** The catalog id (an alias is resolved). */
  readonly model?: string;
  readonly keyId?: string;
  readonly source?: StatementSource;
}

/** What a filter looks at in an entry (the ports' LedgerEntry has it). */
export interface FilteredEntry {
  readonly type: string;
  readonly memo?: { readonly jobId?: string; readonly model: string; readonly keyId?: string };
}

export interface StatementCursor {
  readonly seq: bigint;
  readonly at: Date;
}

export interface StatementInput {
  readonly limit?: number;
  readonly pageToken?: string;
  readonly from?: Date;
  readonly to?: Date;
  readonly types?: readonly string[];
  readonly model?: string;
  readonly keyId?: string;
  readonly source?: string;
}

export interface StatementQuery {
  readonly accountId: string;
  readonly limit: number;
  readonly from?: Date;
  readonly to?: Date;
  readonly before?: StatementCursor;
  /** Undefined: every entry. */
  readonly filter?: StatementFilter;
}

const TOKEN_VERSION = 1;
const SEQ = /^[0-9]{1,30}$/;

/** A time range [from, to): both valid instants, `from` not after `to`. */
export function checkTimeRange(from: Date | undefined, to: Date | undefined): void {
  for (const [field, date] of [["from", from], ["to", to]] as const) {
    if (date !== undefined && Number.isNaN(date.getTime())) throw badRequest("invalid_time_range", `${field} is not a valid time`, { field });
  }
  if (from !== undefined && to !== undefined && from.getTime() > to.getTime()) {
    throw badRequest("invalid_time_range", "from must not be later than to", { field: "from" });
  }
}

const DAY_MS = 86_400_000;

/**
 * A bounded range [from, to) checked as checkTimeRange checks it: `to` defaults to now (or to `from` when that is
 * later), `from` to `defaultDays` before `to`; wider than `maxDays` is refused, naming what the range is for.
 */
export function boundedRange(
  input: { readonly from?: Date; readonly to?: Date }, now: Date, defaultDays: number, maxDays: number, what: string,
): { from: Date; to: Date } {
  checkTimeRange(input.from, input.to);
  const to = input.to ?? (input.from && input.from > now ? input.from : now);
  const from = input.from ?? new Date(to.getTime() - defaultDays * DAY_MS);
  if (to.getTime() - from.getTime() > maxDays * DAY_MS) {
    throw badRequest("invalid_time_range", `${what} covers at most ${maxDays} days (from … to)`, { field: "from" });
  }
  return { from, to };
}

const time = (date: Date | undefined) => (date === undefined ? "" : String(date.getTime()));
// Without filters the scope is the range alone, as before filters existed: tokens issued then stay valid.
const filterKey = (filter: StatementFilter | undefined) =>
  (filter ? `\n${[...(filter.types ?? [])].sort().join(",")}\n${filter.model ?? ""}\n${filter.keyId ?? ""}\n${filter.source ?? ""}` : "");
const scopeOf = (query: Pick<StatementQuery, "accountId" | "from" | "to" | "filter">): TokenScope => ({
  purpose: "ledger-page-token", accountId: query.accountId, filters: `${time(query.from)}\n${time(query.to)}${filterKey(query.filter)}`,
});

export function encodeStatementToken(secret: Buffer, query: Pick<StatementQuery, "accountId" | "from" | "to" | "filter">, cursor: StatementCursor): string {
  return signPageToken(secret, scopeOf(query), [TOKEN_VERSION, cursor.seq.toString(), cursor.at.getTime()]);
}

function decodeStatementToken(secret: Buffer, query: Pick<StatementQuery, "accountId" | "from" | "to" | "filter">, token: string): StatementCursor {
  const fields = readPageToken(secret, scopeOf(query), token);
  if (fields.length !== 3 || fields[0] !== TOKEN_VERSION) throw invalidPageToken("it has an unknown format");
  const [, seq, millis] = fields as [number, unknown, unknown];
  if (typeof seq !== "string" || !SEQ.test(seq) || !Number.isSafeInteger(millis)) throw invalidPageToken("it has an unknown format");
  return { seq: BigInt(seq), at: new Date(millis as number) };
}

export function checkEntryType(type: string): (typeof STATEMENT_ENTRY_TYPES)[number] {
  if (!(STATEMENT_ENTRY_TYPES as readonly string[]).includes(type)) {
    throw badRequest("invalid_entry_type", `type must be among ${STATEMENT_ENTRY_TYPES.join(", ")} (got "${type}")`, { field: "type" });
  }
  return type as (typeof STATEMENT_ENTRY_TYPES)[number];
}

/** A source's name; "" or undefined: no source filter. */
export function checkEntrySource(source: string | undefined): StatementSource | undefined {
  if (source === undefined || source === "") return undefined;
  if (!(STATEMENT_SOURCES as readonly string[]).includes(source)) {
    throw badRequest("invalid_entry_source", `source must be one of ${STATEMENT_SOURCES.join(", ")} (got "${source}")`, { field: "source" });
  }
  return source as StatementSource;
}

/** The filters of a request, checked; undefined when none is set. */
function checkFilter(input: StatementInput): StatementFilter | undefined {
  const types = input.types && input.types.length > 0 ? [...new Set(input.types.map(checkEntryType))] : undefined;
  let model: string | undefined;
  if (input.model) {
    model = findModel(input.model)?.id;
    if (!model) throw badRequest("invalid_model", `model "${input.model}" is not a model of this service (see GET /api/v1/models)`, { field: "model" });
  }
  const keyId = input.keyId || undefined;
  if (keyId !== undefined && keyId.length > 200) throw badRequest("field_too_long", "key_id is longer than 200 characters", { field: "key_id" });
  const source = checkEntrySource(input.source);
  if (!types && !model && !keyId && !source) return undefined;
  return { types, model, keyId, source };
}

/** Whether an entry is listed under a filter. */
export function matchesStatementFilter(filter: StatementFilter, entry: FilteredEntry): boolean {
  if (filter.types && !filter.types.includes(entry.type)) return false;
  if (filter.model !== undefined && entry.memo?.model !== filter.model) return false;
  if (filter.keyId !== undefined && entry.memo?.keyId !== filter.keyId) return false;
  if (filter.source === "job" && entry.memo?.jobId === undefined) return false;
  if (filter.source === "text_call" && (entry.memo === undefined || entry.memo.jobId !== undefined)) return false;
  return true;
}

/** A statement request, checked and resolved (the token last: it is bound to the range and the filters). */
export function parseStatementQuery(secret: Buffer, accountId: string, input: StatementInput): StatementQuery {
  const limit = checkLimit(input.limit);
  checkTimeRange(input.from, input.to);
  const filter = checkFilter(input);
  const before = input.pageToken ? decodeStatementToken(secret, { accountId, from: input.from, to: input.to, filter }, input.pageToken) : undefined;
  return { accountId, limit, from: input.from, to: input.to, before, ...(filter ? { filter } : {}) };
}
