import { badRequest } from "../errors/domain-error.js";
import { checkLimit } from "../jobs/job-list.js";
import { invalidPageToken, readPageToken, signPageToken, type TokenScope } from "../paging/page-token.js";

/**
 * The rules of an account statement (GET /api/v1/ledger, ListLedgerEntries):
 * page size 1–100 (default 20, as job listings), an optional time range
 * [from, to), and a signed cursor bound to the account and the range. Entries
 * are newest first; a page continues strictly below the previous page's last.
 */

export interface StatementCursor {
  readonly seq: bigint;
  readonly at: Date;
}

export interface StatementInput {
  readonly limit?: number;
  readonly pageToken?: string;
  readonly from?: Date;
  readonly to?: Date;
}

export interface StatementQuery {
  readonly accountId: string;
  readonly limit: number;
  readonly from?: Date;
  readonly to?: Date;
  readonly before?: StatementCursor;
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

const time = (date: Date | undefined) => (date === undefined ? "" : String(date.getTime()));
const scopeOf = (accountId: string, from?: Date, to?: Date): TokenScope => ({
  purpose: "ledger-page-token", accountId, filters: `${time(from)}\n${time(to)}`,
});

export function encodeStatementToken(secret: Buffer, query: Pick<StatementQuery, "accountId" | "from" | "to">, cursor: StatementCursor): string {
  return signPageToken(secret, scopeOf(query.accountId, query.from, query.to), [TOKEN_VERSION, cursor.seq.toString(), cursor.at.getTime()]);
}

function decodeStatementToken(secret: Buffer, accountId: string, from: Date | undefined, to: Date | undefined, token: string): StatementCursor {
  const fields = readPageToken(secret, scopeOf(accountId, from, to), token);
  if (fields.length !== 3 || fields[0] !== TOKEN_VERSION) throw invalidPageToken("it has an unknown format");
  const [, seq, millis] = fields as [number, unknown, unknown];
  if (typeof seq !== "string" || !SEQ.test(seq) || !Number.isSafeInteger(millis)) throw invalidPageToken("it has an unknown format");
  return { seq: BigInt(seq), at: new Date(millis as number) };
}

/** A statement request, checked and resolved (the token last: it is bound to the range). */
export function parseStatementQuery(secret: Buffer, accountId: string, input: StatementInput): StatementQuery {
  const limit = checkLimit(input.limit);
  checkTimeRange(input.from, input.to);
  const before = input.pageToken ? decodeStatementToken(secret, accountId, input.from, input.to, input.pageToken) : undefined;
  return { accountId, limit, from: input.from, to: input.to, before };
}
