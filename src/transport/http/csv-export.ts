import { Readable } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { GetUsageResponse } from "../../../gen/generation/v1/generation_service_pb.js";
import type { LedgerEntry } from "../../../gen/generation/v1/money_pb.js";
import { LEDGER_ENTRY, USAGE } from "./schemas/money.js";

/** One page of the statement as the core answers it. */
export interface StatementPage {
  readonly entries: LedgerEntry[];
  readonly nextPageToken: string;
}

/** Entries read per core call while a statement is exported, when the query names no limit (the statement's most). */
export const CSV_PAGE_SIZE = 100;

/** A file name of safe characters only: the account id is the caller's text. */
export const csvFilename = (stem: string, accountId?: string) =>
  `${stem}${accountId ? `-${accountId.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64)}` : ""}.csv`;

/** The statement's columns: the JSON entry's fields, in this order. */
export const LEDGER_COLUMNS = [
  "entry_id", "type", "amount", "balance_after", "reserved_change", "reserved_after", "job_id", "model", "key_id",
  "prompt_token_count", "candidates_token_count", "reason", "created_at", "adjustment_reason",
] as const;

const USAGE_COLUMNS = ["requests", "prompt_token_count", "candidates_token_count", "spend"] as const;

/** q of one media range of an Accept header (1 when absent; 0 for a malformed q). */
function qualityOf(parameters: string[]): number {
  const q = parameters.map((part) => part.trim()).find((part) => part.toLowerCase().startsWith("q="));
  if (q === undefined) return 1;
  const value = Number(q.slice(2));
  return Number.isFinite(value) ? value : 0;
}

/** CSV when the Accept header names text/csv at least as highly as JSON (JSON stays the default of `*\/*` and no header). */
export function wantsCsv(request: FastifyRequest): boolean {
  const accept = request.headers.accept;
  if (!accept) return false;
  let csv = 0;
  let json = 0;
  for (const range of accept.split(",")) {
    const [type = "", ...parameters] = range.split(";");
    const name = type.trim().toLowerCase();
    if (name === "text/csv") csv = Math.max(csv, qualityOf(parameters));
    else if (name === "application/json") json = Math.max(json, qualityOf(parameters));
  }
  return csv > 0 && csv >= json;
}

/** RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled. */
export function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

/** One record, CRLF-terminated (RFC 4180); null and absent values are empty fields. */
export function csvLine(values: readonly unknown[]): string {
  return `${values.map((value) => csvField(value === null || value === undefined ? "" : String(value))).join(",")}\r\n`;
}

/** The statement's rows as JSON gives them: every column of LEDGER_COLUMNS, in order. */
const ledgerRow = (entry: LedgerEntry) => {
  const json = LEDGER_ENTRY.json(entry) as Record<string, unknown>;
  return csvLine(LEDGER_COLUMNS.map((column) => json[column]));
};

/** The header line, then each page's rows; the next page is read only once the stream asks for more (backpressure). */
async function* statementLines(first: StatementPage, readPage: (pageToken: string) => Promise<StatementPage>) {
  yield csvLine(LEDGER_COLUMNS);
  let page = first;
  for (;;) {
    if (page.entries.length > 0) yield page.entries.map(ledgerRow).join("");
    if (page.nextPageToken === "") return;
    page = await readPage(page.nextPageToken);
  }
}

function attachment(reply: FastifyReply, filename: string): void {
  reply.header("content-type", "text/csv; charset=utf-8");
  reply.header("content-disposition", `attachment; filename="${filename}"`);
  reply.header("cache-control", "no-store");
}

/**
 * The statement as CSV, streamed: the first page is read before anything is sent (so a refusal is answered in the
 * route's error shape), the others as the client takes the rows. A store failure after that ends the response early
 * (the chunked body is cut, so a client cannot take it for complete).
 */
export async function sendStatementCsv(
  reply: FastifyReply, filename: string, firstToken: string, readPage: (pageToken: string) => Promise<StatementPage>,
): Promise<FastifyReply> {
  const first = await readPage(firstToken);
  attachment(reply, filename);
  return reply.send(Readable.from(statementLines(first, readPage), { objectMode: false }));
}

/** A usage report as CSV: one row per group (its column is the grouping's: model, key_id or day); bounded by its groups. */
export function sendUsageCsv(
  reply: FastifyReply, filename: string, groupColumn: "model" | "key_id" | "day", usage: GetUsageResponse | undefined,
): FastifyReply {
  const json = USAGE.json(usage) as { rows: Record<string, unknown>[] };
  const records = json.rows.map((row) => csvLine([row[groupColumn], ...USAGE_COLUMNS.map((column) => row[column])]));
  const lines = [csvLine([groupColumn, ...USAGE_COLUMNS]), ...records];
  attachment(reply, filename);
  return reply.send(lines.join(""));
}
