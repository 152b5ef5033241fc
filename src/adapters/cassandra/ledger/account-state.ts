import { randomBytes } from "node:crypto";
import type { Money } from "../../../domain/money.js";
import type { ReleaseReason } from "../../../domain/ledger/release-reasons.js";
import { countsAsOpenHold } from "../../../domain/pricing/settlement.js";
import { NO_SPENDING, type KeySpending } from "../../../domain/accounts/key-limits.js";
import { decodeKeySpending } from "../../shared/key-limits-codec.js";
import type { AccountChange, HoldMemo, LedgerEntryType, ReserveOptions, ReserveOutcome, SettledTokens, Settlement } from "../../../ports/ledger.js";
import type { Row } from "../cassandra-session.js";

/** One money operation on an account, as its queue carries it into a round. */
export type Operation =
  | { kind: "reserve"; reservationId: string; amount: Money; options?: ReserveOptions }
  | { kind: "settle"; reservationId: string; amount: Money; tokens?: SettledTokens }
  | { kind: "release"; reservationId: string; reason?: ReleaseReason }
  /**
   * `audit`: the credit's audit event (encodeRecord), carried by its journal entry (AuditOutbox). `once`: the
   * operation's id (decision 0039): applied only when the account has no entry made under it (its once row).
   */
  | { kind: "credit"; amount: Money; audit?: string; once?: string }
  /** An operator's adjustment (decision 0037): a debit beyond the available balance is refused. `once`: as credit's. */
  | { kind: "adjust"; amount: Money; reason: string; audit?: string; once?: string }
  /** UpdateAccount (decision 0038): the name and/or the low-balance threshold (null: none), written with the money. */
  | { kind: "settings"; change: AccountChange };

/**
 * A settle that ended its hold answers its Settlement; one that found no hold
 * "no_hold" (turned into the settlement recorded before, or nothing, by
 * the ledger's `resolveRepeats`); the rest "done".
 */
export type Outcome =
  | ReserveOutcome | "done" | "no_hold" | Settlement | { readonly adjusted: JournalEntry } | { readonly credited: JournalEntry }
  /** A credit or adjustment whose `once` id had made an entry already: that entry; nothing moved. */
  | { readonly madeBefore: JournalEntry };

/** An operation waiting in its account's queue, with its id (kept on the entry it makes). */
export interface Pending {
  readonly id: string;
  readonly operation: Operation;
  resolve(outcome: Outcome): void;
  reject(error: unknown): void;
}

/** An open hold, as its row keeps it. */
export interface Hold {
  readonly amount: Money;
  /** What it is for (JSON HoldMemo). */
  readonly memo?: string;
}

/** Per key of the account: the sum of its open holds and how many of them are jobs. */
export interface KeyHolds {
  readonly held: Money;
  readonly openJobs: number;
}

export interface AccountState {
  balance: Money;
  reserved: Money;
  version: bigint;
  /** The account's name (written by every round, changed by a "settings" operation). */
  name: string;
  /** The low-balance threshold (undefined: no alert) and whether available was below it when last judged. */
  lowBalanceThreshold: Money | undefined;
  lowBalance: boolean;
  /** The entries of the last write (null on a row from before the statement existed). */
  journal: Journal | null;
  /** Per key of the account: its spending (JSON KeySpending). */
  keys: Map<string, string>;
  /** Per key: its open holds' sum and open jobs, kept by every round (key_holds). */
  keyHolds: Map<string, KeyHolds>;
  /** Open holds in all (open_holds). */
  openHolds: number;
  /** Per open-hold rule (ruleKey): the holds it counts, kept by every round once a round has counted it (open_counts). */
  openCounts: Map<string, number>;
  /**
   * The hold rows known at this version: an open hold, or null for one known
   * to be absent (within a round only). Never all of them: a round knows the
   * holds it read or wrote, and reads the others it names.
   */
  holds: Map<string, Hold | null>;
  /**
   * The once rows known at this version (decision 0039), by operation id: the entry its operation made, or null for
   * one known to be absent (within a round only). A round reads those its operations name and does not know.
   */
  once: Map<string, JournalEntry | null>;
}

/**
 * What a round knew of each hold row it touched when it began: open, absent
 * (read), or assumed absent (a reservation's new id, not read: its row is
 * written IF NOT EXISTS, so the round applies only if it was absent).
 */
export type Before = "open" | "absent" | "assumed";
export type TouchedHolds = Map<string, Before>;

/** An entry as the row's journal keeps it (JSON: money and seq as decimal strings, time in ms). */
export interface JournalEntry {
  readonly seq: string;
  readonly type: LedgerEntryType;
  readonly amount: string;
  readonly balanceAfter: string;
  readonly reservedChange: string;
  readonly reservedAfter: string;
  readonly memo?: HoldMemo;
  readonly tokens?: SettledTokens;
  /** On a release: why (absent on other entries, and in journals written before releases said why). */
  readonly reason?: ReleaseReason;
  /** On an adjustment: the operator's reason. */
  readonly note?: string;
  readonly at: number;
  /** The id of the operation that made it (absent in journals written before version 12). */
  readonly op?: string;
  /** On an audited credit: its audit event (JSON), copied into audit_events with the journal (migration 0017). */
  readonly audit?: string;
}

export interface Journal {
  readonly version: string;
  readonly entries: JournalEntry[];
}

/** The clustering key of an account's money row (a hold's id is never empty). */
export const MONEY = "";

const DAY_MS = 86_400_000;
export const dayOf = (ms: number) => Math.floor(ms / DAY_MS);
/** An entry's seq: the version of the write that made it, then its place in that write's batch (< MAX_BATCH + carried-forward holds). */
export const SEQ_PER_VERSION = 1_000_000n;

/**
 * The row of the account's partition that records a named operation's entry (decision 0039): written IF NOT EXISTS
 * in the conditional write that applies it, never changed nor deleted. Its prefix is no hold's (those are `job:`).
 */
export const onceRow = (operationId: string) => `once:${operationId}`;
export const isOnceRow = (rowId: string) => rowId.startsWith("once:");
const operationOfRow = (rowId: string) => rowId.slice("once:".length);

/** A once row's entry (its `entry` column, JSON). */
export const onceEntryOf = (row: Row): JournalEntry | null => (typeof row.entry === "string" ? (JSON.parse(row.entry) as JournalEntry) : null);

/** An operation's id, kept on the entry it makes: 96 random bits, 16 characters. */
export const newOperationId = () => randomBytes(12).toString("base64url");

/** The least id above every id that starts with the prefix (undefined: no bound, for the empty prefix). */
export function after(prefix: string): string | undefined {
  if (prefix === "") return undefined;
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}

/** An open-hold rule's key in open_counts. */
export const ruleKey = (countedPrefix: string, exceptPrefix?: string) => JSON.stringify([countedPrefix, exceptPrefix ?? null]);
export const ruleOf = (key: string) => JSON.parse(key) as [string, string | null];

function encodeKeyHolds(holds: KeyHolds): string {
  return JSON.stringify({ held: holds.held.toString(), openJobs: holds.openJobs });
}

export function decodeKeyHolds(text: string): KeyHolds {
  const parsed = JSON.parse(text) as { held: string; openJobs: number };
  return { held: BigInt(parsed.held), openJobs: parsed.openJobs };
}

/** The key_holds column of the money row, as the state keeps it. */
export function keyHoldsColumn(state: AccountState): Record<string, string> {
  return Object.fromEntries([...state.keyHolds].map(([key, held]) => [key, encodeKeyHolds(held)]));
}

/** An open hold as its row keeps it. */
export function holdOf(row: Row): Hold {
  return { amount: row.amount as bigint, ...(row.memo === null ? {} : { memo: row.memo as string }) };
}

/** The account's tallies with a hold added (+1) or taken away (-1). */
export function tally(state: AccountState, reservationId: string, hold: Hold, sign: 1 | -1): void {
  state.openHolds += sign;
  for (const [key, count] of state.openCounts) {
    const [counted, except] = ruleOf(key);
    if (countsAsOpenHold(reservationId, counted, except ?? undefined)) state.openCounts.set(key, count + sign);
  }
  const memo = hold.memo === undefined ? undefined : (JSON.parse(hold.memo) as HoldMemo);
  if (memo?.keyId === undefined) return;
  const was = state.keyHolds.get(memo.keyId) ?? { held: 0n, openJobs: 0 };
  const now = { held: was.held + (sign > 0 ? hold.amount : -hold.amount), openJobs: was.openJobs + (memo.jobId !== undefined ? sign : 0) };
  if (now.held === 0n && now.openJobs === 0) state.keyHolds.delete(memo.keyId);
  else state.keyHolds.set(memo.keyId, now);
}

/** An account's state from its money row, with no hold known. */
export function stateOf(row: Row): AccountState {
  return {
    balance: row.balance as bigint,
    reserved: row.reserved as bigint,
    version: row.version as bigint,
    name: (row.name as string | null | undefined) ?? "",
    lowBalanceThreshold: (row.low_balance_threshold as bigint | null | undefined) ?? undefined,
    lowBalance: (row.low_balance as boolean | null | undefined) ?? false,
    journal: parseJournal(row.journal),
    keys: new Map(Object.entries((row.key_spending as Record<string, string> | null) ?? {})),
    keyHolds: new Map(Object.entries((row.key_holds as Record<string, string> | null) ?? {}).map(([key, text]) => [key, decodeKeyHolds(text)])),
    openHolds: row.open_holds as number,
    openCounts: new Map(Object.entries((row.open_counts as Record<string, number> | null) ?? {})),
    holds: new Map(),
    once: new Map(),
  };
}

/**
 * The account as a lost round found it: a failed conditional batch answers
 * the current rows its conditions name (the money row, whole, and each named
 * hold row that exists), as read by its Paxos round. Undefined without a
 * money row.
 */
export function stateAfterLoss(rows: readonly Row[], named: readonly string[]): AccountState | undefined {
  const money = rows.find((row) => row.hold_id === MONEY);
  // Whole rows come back only when some statement of the batch is IF [NOT] EXISTS; otherwise only the version.
  if (!money || money.version === null || money.version === undefined || money.balance === undefined) return undefined;
  const state = stateOf(money);
  for (const id of named) {
    if (isOnceRow(id)) state.once.set(operationOfRow(id), null);
    else state.holds.set(id, null);
  }
  for (const row of rows) {
    const id = row.hold_id as string;
    if (id === MONEY) continue;
    if (isOnceRow(id)) state.once.set(operationOfRow(id), onceEntryOf(row));
    else state.holds.set(id, holdOf(row));
  }
  return state;
}

export function parseJournal(value: unknown): Journal | null {
  return typeof value === "string" && value !== "" ? (JSON.parse(value) as Journal) : null;
}

export function spendingOf(state: AccountState, keyId: string): KeySpending {
  const text = state.keys.get(keyId);
  return text === undefined ? NO_SPENDING : decodeKeySpending(text);
}

/** A key's open holds: their sum, and how many are jobs (a text call's memo names no job). */
export function keyHolds(state: AccountState, keyId: string): KeyHolds {
  return state.keyHolds.get(keyId) ?? { held: 0n, openJobs: 0 };
}
