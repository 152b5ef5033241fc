import assert from "node:assert/strict";
import { call, pico } from "./harness.js";

export interface LedgerEntryJson {
  entry_id: string;
  type: "credit" | "hold" | "charge" | "release" | "adjustment";
  amount: string;
  balance_after: string;
  job_id: string | null;
  model: string | null;
  created_at: string;
  reserved_change: string;
  reserved_after: string;
  key_id: string | null;
  prompt_token_count: number;
  candidates_token_count: number;
  /** On releases: why nothing was charged (domain/ledger/release-reasons.ts); null elsewhere. */
  reason: string | null;
  /** On adjustments: the operator's reason; null elsewhere. */
  adjustment_reason: string | null;
}

/** Who reads the statement: the account's key (GET /api/v1/ledger) or the operator (GET /admin/v1/accounts/{id}/ledger). */
export type StatementReader = { readonly key: string } | { readonly accountId: string };

/** Every entry of an account, newest first, read page by page; `filter`: more of the query ("source=text_call&type=charge"). */
export async function allEntries(service: { url: string }, reader: StatementReader, pageSize = 100, filter = ""): Promise<LedgerEntryJson[]> {
  const entries: LedgerEntryJson[] = [];
  let token: string | null = null;
  const path = "key" in reader ? "/api/v1/ledger" : `/admin/v1/accounts/${encodeURIComponent(reader.accountId)}/ledger`;
  do {
    const query: string = `?limit=${pageSize}${filter ? `&${filter}` : ""}${token ? `&page_token=${encodeURIComponent(token)}` : ""}`;
    const response = await call(service, "GET", path + query, "key" in reader ? { key: reader.key } : { admin: true });
    assert.equal(response.status, 200, response.text);
    entries.push(...(response.json.entries as LedgerEntryJson[]));
    token = response.json.next_page_token as string | null;
  } while (token);
  return entries;
}

/**
 * The statement reconciles with the balance: the entries' amounts add up to
 * the balance and their reserved changes to reserved; each entry's
 * balance_after and reserved_after follow from the one before it; the newest
 * entry's balance_after is the balance; and every hold ended at most once.
 */
export async function assertLedgerReconciles(service: { url: string }, reader: StatementReader): Promise<LedgerEntryJson[]> {
  const entries = await allEntries(service, reader);
  const balance = "key" in reader
    ? (await call(service, "GET", "/api/v1/balance", { key: reader.key })).json
    : (await call(service, "GET", `/admin/v1/accounts/${encodeURIComponent(reader.accountId)}/balance`, { admin: true })).json;
  const chronological = [...entries].reverse();
  let sum = 0n;
  let reserved = 0n;
  for (const entry of chronological) {
    sum += pico(entry.amount);
    reserved += pico(entry.reserved_change);
    assert.equal(pico(entry.balance_after), sum, `entry ${entry.entry_id}: balance_after follows from the entries before it`);
    assert.equal(pico(entry.reserved_after), reserved, `entry ${entry.entry_id}: reserved_after follows from the entries before it`);
    if (entry.type === "hold" || entry.type === "release") assert.equal(pico(entry.amount), 0n, `a ${entry.type} moves no balance`);
    if (entry.type === "hold") assert.ok(pico(entry.reserved_change) >= 0n);
    if (entry.type === "charge" || entry.type === "release") assert.ok(pico(entry.reserved_change) <= 0n);
    if (entry.type === "charge") assert.ok(pico(entry.amount) <= 0n);
    if (entry.type === "credit") assert.ok(pico(entry.amount) > 0n);
    if (entry.type !== "release") assert.equal(entry.reason, null, `entry ${entry.entry_id}: only a release says why`);
  }
  assert.equal(sum, pico(balance.balance), "the entries add up to the balance");
  assert.equal(reserved, pico(balance.reserved), "the reserved changes add up to reserved");
  if (entries.length > 0) assert.equal(entries[0]!.balance_after, balance.balance, "the newest entry's balance_after is the balance");
  const ends = new Map<string, number>();
  for (const entry of entries) {
    if (entry.job_id && (entry.type === "charge" || entry.type === "release")) ends.set(entry.job_id, (ends.get(entry.job_id) ?? 0) + 1);
  }
  for (const [jobId, count] of ends) assert.equal(count, 1, `job ${jobId}'s hold ended once`);
  const ids = new Set(entries.map((entry) => entry.entry_id));
  assert.equal(ids.size, entries.length, "no entry is listed twice");
  return entries;
}
