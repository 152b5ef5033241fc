import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import {
  LedgerEntrySchema, LedgerEntrySource as SourceProto, LedgerEntryType as EntryTypeProto, UsageGrouping as GroupingProto,
  type LedgerEntry as LedgerEntryMessage,
} from "../../../gen/generation/v1/money_pb.js";
import type { GetUsageRequest, ListLedgerEntriesRequest } from "../../../gen/generation/v1/generation_service_pb.js";
import { encodeStatementToken, matchesStatementFilter, parseStatementQuery, type StatementQuery } from "../../domain/ledger/statement.js";
import { parseUsageQuery, UsageTally, type UsageGrouping } from "../../domain/ledger/usage.js";
import { formatMoney } from "../../domain/money.js";
import type { Ledger, LedgerCursor, LedgerEntry, LedgerEntryPage, LedgerEntryType } from "../../ports/ledger.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { GetUsageResponseSchema } from "../../../gen/generation/v1/generation_service_pb.js";

const TYPE_TO_PROTO: Record<LedgerEntryType, EntryTypeProto> = {
  credit: EntryTypeProto.CREDIT,
  hold: EntryTypeProto.HOLD,
  charge: EntryTypeProto.CHARGE,
  release: EntryTypeProto.RELEASE,
  adjustment: EntryTypeProto.ADJUSTMENT,
};

const TYPE_NAMES = new Map<EntryTypeProto, string>(Object.entries(TYPE_TO_PROTO).map(([name, value]) => [value, name]));

const SOURCE_NAMES: Partial<Record<SourceProto, string>> = {
  [SourceProto.JOB]: "job",
  [SourceProto.TEXT_CALL]: "text_call",
};

const GROUPING_NAMES: Record<GroupingProto, string | undefined> = {
  [GroupingProto.UNSPECIFIED]: undefined,
  [GroupingProto.MODEL]: "model",
  [GroupingProto.KEY]: "key",
  [GroupingProto.DAY]: "day",
};

const dateOf = (timestamp: Timestamp | undefined) => (timestamp ? timestampDate(timestamp) : undefined);

export function entryView(entry: LedgerEntry): LedgerEntryMessage {
  return create(LedgerEntrySchema, {
    entryId: entry.seq.toString(),
    type: TYPE_TO_PROTO[entry.type],
    amount: formatMoney(entry.amount),
    balanceAfter: formatMoney(entry.balanceAfter),
    jobId: entry.memo?.jobId,
    model: entry.memo?.model,
    keyId: entry.memo?.keyId,
    createdAt: timestampFromDate(entry.at),
    reservedChange: formatMoney(entry.reservedChange),
    reservedAfter: formatMoney(entry.reservedAfter),
    promptTokenCount: BigInt(entry.tokens?.promptTokens ?? 0),
    candidatesTokenCount: BigInt(entry.tokens?.candidatesTokens ?? 0),
    reason: entry.type === "release" ? entry.reason ?? "" : "",
    adjustmentReason: entry.type === "adjustment" ? entry.note ?? "" : "",
  });
}

/** One page of an account's statement; every rule (bounds, range, the token) is the domain's. */
export async function statementPage(
  ledger: Ledger, secret: Buffer, accountId: string, request: ListLedgerEntriesRequest,
): Promise<{ entries: LedgerEntryMessage[]; nextPageToken: string }> {
  const query = parseStatementQuery(secret, accountId, {
    limit: request.limit,
    pageToken: request.pageToken === "" ? undefined : request.pageToken,
    from: dateOf(request.from),
    to: dateOf(request.to),
    // An unknown enum value reaches the domain as its number, which it refuses.
    types: request.types.map((type) => TYPE_NAMES.get(type) ?? String(type)),
    model: request.model,
    keyId: request.keyId,
    source: request.source === SourceProto.UNSPECIFIED ? undefined : SOURCE_NAMES[request.source] ?? String(request.source),
  });
  const page = query.filter ? await filteredPage(ledger, query) : await ledger.entries({ accountId, limit: query.limit, from: query.from, to: query.to, before: query.before });
  return {
    entries: page.entries.map(entryView),
    nextPageToken: page.next ? encodeStatementToken(secret, query, page.next) : "",
  };
}

/** Entries a filtered page reads at most: a sparse filter answers fewer entries and a token to go on, never a long scan. */
const FILTER_SCAN = 2_000;
const FILTER_READ = 200;

/** A page of the entries that match the query's filter, read from the store's pages and cut at `limit` matches. */
async function filteredPage(ledger: Ledger, query: StatementQuery): Promise<LedgerEntryPage> {
  const entries: LedgerEntry[] = [];
  let before = query.before;
  let scanned = 0;
  for (;;) {
    const page = await ledger.entries({ accountId: query.accountId, limit: FILTER_READ, from: query.from, to: query.to, before });
    for (const entry of page.entries) {
      scanned++;
      if (!matchesStatementFilter(query.filter!, entry)) continue;
      entries.push(entry);
      if (entries.length === query.limit) return { entries, next: { seq: entry.seq, at: entry.at } };
    }
    if (!page.next) return { entries };
    before = page.next;
    if (scanned >= FILTER_SCAN) return { entries, next: before };
  }
}

/** Entries read per store call while a report adds them up. */
const USAGE_PAGE = 1_000;

/** A usage report from the account's settled charges in the range. */
export async function usageReport(
  ledger: Ledger, accountId: string, request: GetUsageRequest, now: Date,
): Promise<MessageInitShape<typeof GetUsageResponseSchema>> {
  const query = parseUsageQuery({ from: dateOf(request.from), to: dateOf(request.to), groupBy: GROUPING_NAMES[request.groupBy] ?? String(request.groupBy) }, now);
  const tally = new UsageTally(query);
  let before: LedgerCursor | undefined;
  for (;;) {
    const page = await ledger.entries({ accountId, limit: USAGE_PAGE, from: query.from, to: query.to, before });
    for (const entry of page.entries) {
      if (entry.type !== "charge") continue;
      tally.add({
        amount: -entry.amount, model: entry.memo?.model, keyId: entry.memo?.keyId, at: entry.at,
        promptTokens: entry.tokens?.promptTokens ?? 0, candidatesTokens: entry.tokens?.candidatesTokens ?? 0,
      });
    }
    if (!page.next) break;
    before = page.next;
  }
  const rows = tally.rows();
  return {
    from: timestampFromDate(query.from),
    to: timestampFromDate(query.to),
    rows: rows.map((row) => ({
      group: groupOf(query.groupBy, row.group),
      requests: BigInt(row.requests),
      promptTokenCount: BigInt(row.promptTokens),
      candidatesTokenCount: BigInt(row.candidatesTokens),
      spend: formatMoney(row.spend),
    })),
  };
}

function groupOf(grouping: UsageGrouping, value: string) {
  if (grouping === "model") return { case: "model" as const, value };
  if (grouping === "key") return { case: "keyId" as const, value };
  return { case: "day" as const, value };
}
