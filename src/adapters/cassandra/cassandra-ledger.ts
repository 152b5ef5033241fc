import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Money } from "../../domain/money.js";
import { readReleaseReason, type ReleaseReason } from "../../domain/ledger/release-reasons.js";
import { boundedCharge, countsAsOpenHold } from "../../domain/pricing/settlement.js";
import { countCharge, countReservation, keyAdmission, NO_SPENDING, type KeyRefusal, type KeySpending } from "../../domain/accounts/key-limits.js";
import { decodeKeySpending, encodeKeySpending } from "../shared/key-limits-codec.js";
import type {
  BalanceSnapshot, HoldMemo, KeyAccount, Ledger, LedgerCursor, LedgerEntry, LedgerEntryPage, LedgerEntryQuery, LedgerEntryType, ReserveOptions, ReserveOutcome,
  KeyReservation, SettledTokens, Settlement, Shortfall,
} from "../../ports/ledger.js";
import { AmbiguousWriteError, conditional, conditionalBatch, serialRead, type CassandraClient, type Row } from "./cassandra-session.js";
import { noTelemetry, type Telemetry } from "../../ports/telemetry.js";
import { DependencyUnavailableError } from "../../ports/dependency.js";

type Operation =
  | { kind: "reserve"; reservationId: string; amount: Money; options?: ReserveOptions }
  | { kind: "settle"; reservationId: string; amount: Money; tokens?: SettledTokens }
  | { kind: "release"; reservationId: string; reason?: ReleaseReason }
  | { kind: "credit"; amount: Money };

/**
 * A settle that ended its hold answers its Settlement; one that found no hold
 * "no_hold" (turned into the settlement recorded before, or nothing, by
 * `repeatsResolved`); the rest "done".
 */
type Outcome = ReserveOutcome | "done" | "no_hold" | Settlement;

interface Pending {
  readonly id: string;
  readonly operation: Operation;
  resolve(outcome: Outcome): void;
  reject(error: unknown): void;
}

/** An open hold, as its row keeps it. */
interface Hold {
  readonly amount: Money;
  /** What it is for (JSON HoldMemo). */
  readonly memo?: string;
}

/** Per key of the account: the sum of its open holds and how many of them are jobs. */
interface KeyHolds {
  readonly held: Money;
  readonly openJobs: number;
}

interface AccountState {
  balance: Money;
  reserved: Money;
  version: bigint;
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
}

/**
 * What a round knew of each hold row it touched when it began: open, absent
 * (read), or assumed absent (a reservation's new id, not read: its row is
 * written IF NOT EXISTS, so the round applies only if it was absent).
 */
type Before = "open" | "absent" | "assumed";
type TouchedHolds = Map<string, Before>;

/** The clustering key of an account's money row (a hold's id is never empty). */
const MONEY = "";

/** The least id above every id that starts with the prefix (undefined: no bound, for the empty prefix). */
function after(prefix: string): string | undefined {
  if (prefix === "") return undefined;
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}

/** An open-hold rule's key in open_counts. */
const ruleKey = (countedPrefix: string, exceptPrefix?: string) => JSON.stringify([countedPrefix, exceptPrefix ?? null]);
const ruleOf = (key: string) => JSON.parse(key) as [string, string | null];

function encodeKeyHolds(holds: KeyHolds): string {
  return JSON.stringify({ held: holds.held.toString(), openJobs: holds.openJobs });
}

/** The key_holds column of the money row, as the state keeps it. */
function keyHoldsColumn(state: AccountState): Record<string, string> {
  return Object.fromEntries([...state.keyHolds].map(([key, held]) => [key, encodeKeyHolds(held)]));
}

/** An open hold as its row keeps it. */
function holdOf(row: Row): Hold {
  return { amount: row.amount as bigint, ...(row.memo === null ? {} : { memo: row.memo as string }) };
}

function decodeKeyHolds(text: string): KeyHolds {
  const parsed = JSON.parse(text) as { held: string; openJobs: number };
  return { held: BigInt(parsed.held), openJobs: parsed.openJobs };
}

/** The account's tallies with a hold added (+1) or taken away (-1). */
function tally(state: AccountState, reservationId: string, hold: Hold, sign: 1 | -1): void {
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

/** An entry as the row's journal keeps it (JSON: money and seq as decimal strings, time in ms). */
interface JournalEntry {
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
  readonly at: number;
  /** The id of the operation that made it (absent in journals written before version 12). */
  readonly op?: string;
}

interface Journal {
  readonly version: string;
  readonly entries: JournalEntry[];
}

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => Math.floor(ms / DAY_MS);
/** An entry's seq: the version of the write that made it, then its place in that write's batch (< MAX_BATCH + carried-forward holds). */
const SEQ_PER_VERSION = 1_000_000n;
/** Entry rows one statement page reads at most; a page of sparse matches ends early with a cursor. */
const MAX_ROWS_PER_PAGE = 1_000;
/** Rounds (ledger_rounds rows, up to MAX_BATCH entries each) one statement read asks for. */
const ROUNDS_PER_READ = 8;
/** Entries copied one by one (ledger_entries, before version 12) one statement read asks for. */
const ENTRIES_PER_READ = 200;
const ENTRY_COLUMNS =
  "seq, type, amount, balance_after, reserved_change, reserved_after, job_id, model, key_id, prompt_tokens, candidates_tokens, at";

/** An operation's id, kept on the entry it makes: 96 random bits, 16 characters. */
const newOperationId = () => randomBytes(12).toString("base64url");

/**
 * What a process keeps of the rows its rounds last wrote (CassandraLedger's
 * WrittenRows): at most this many accounts, and this many known holds over
 * them all (each some 200 bytes with its memo: about 40 MB), the account
 * written longest ago forgotten first. An account that alone knows more is
 * not kept: its next round reads its money row and the holds it names.
 */
const MAX_WRITTEN_ACCOUNTS = 1_000;
const MAX_WRITTEN_HOLDS = 200_000;

/** The rows this process's rounds last wrote, bounded by accounts and by open holds. */
class WrittenRows {
  private readonly rows = new Map<string, AccountState>();
  private holds = 0;

  constructor(private readonly maxHolds: number) {}

  /** The account's row as last written here, taken out (a round puts back the row it leaves). */
  take(accountId: string): AccountState | undefined {
    const row = this.rows.get(accountId);
    if (row) {
      this.rows.delete(accountId);
      this.holds -= row.holds.size;
    }
    return row;
  }

  keep(accountId: string, row: AccountState): void {
    this.take(accountId);
    if (row.holds.size > this.maxHolds) return;
    while (this.rows.size >= MAX_WRITTEN_ACCOUNTS || this.holds + row.holds.size > this.maxHolds) this.take(this.rows.keys().next().value!);
    this.rows.set(accountId, row);
    this.holds += row.holds.size;
  }
}
/** A random pause after a lost round, longer the more rounds were lost (at most 50 ms). */
const backOff = (attempt: number) => sleep(Math.floor(Math.random() * Math.min(50, 2 + attempt * 5)));

/** Operations folded into one conditional write. */
const MAX_BATCH = 128;
const MAX_ATTEMPTS = 60;
/** Rounds whose sizes set what the next round waits for. */
const REMEMBERED_ROUNDS = 8;
/** The longest a round waits for operations to gather: never more than half the last round took. */
const MAX_GATHER_MS = 5;

/**
 * When a round may wait for operations still on their way. A round carries
 * what queued while the last one ran; callers whose answers travel further
 * (forwarded from another process, or on a slower path) ask again a moment
 * after the others, and without waiting they would miss the next round and
 * ride the one after, alone: an account's callers split into groups that
 * take turns, and each round carries only a part of them (an owner's rounds
 * carried 32 of its 64 callers with one other writer forwarding to it). So
 * a round that would carry fewer operations than the largest of the last
 * REMEMBERED_ROUNDS waits until that many have queued, for at most half as
 * long as the last round took (and MAX_GATHER_MS): a round half as full
 * costs a whole round. Callers that ask one at a time never wait (the
 * largest recent round is theirs), and a load that shrinks stops waiting
 * after REMEMBERED_ROUNDS rounds.
 */
export class RoundSizes {
  private readonly sizes: number[] = [];
  private lastMs = 0;

  ended(operations: number, ms: number): void {
    this.sizes.push(operations);
    if (this.sizes.length > REMEMBERED_ROUNDS) this.sizes.shift();
    this.lastMs = ms;
  }

  /** What the next round should wait for, given the operations queued now; undefined to start at once. */
  gatherFor(queued: number): { target: number; ms: number } | undefined {
    const target = Math.min(MAX_BATCH, Math.max(0, ...this.sizes));
    const ms = Math.min(MAX_GATHER_MS, this.lastMs / 2);
    return queued < target && ms >= 1 ? { target, ms } : undefined;
  }
}

/**
 * The ledger on Cassandra. An account is one partition of account_ledger: its
 * money in one row (hold_id '', the money row), changed only by
 * `UPDATE ... IF version = ?`, and one row per open hold, added and removed in
 * the same conditional batch.
 * Within a process, operations on one account queue and are group-committed:
 * one Paxos round applies a whole batch, so a hot account is limited by round
 * trips, not by contention. A round starts from the row this process's last
 * round wrote (no read) and reads only the hold rows it names and does not
 * know; a reservation's new id is not read but written IF NOT EXISTS. Across
 * processes the version check keeps every batch serial, and a loser reads the
 * money row and is judged again. Each round's entries (its journal, each
 * entry with the id of the operation that made it) are written in the money
 * row and copied, one row per round, into ledger_rounds before the next round
 * replaces them. A write of unknown outcome is settled by reading: its
 * operations' entries are in the journal of the version it would have
 * written, or it was not applied; never by writing again blindly.
 * The open-hold counts and per-key held sums are tallies in the money row,
 * kept by the rounds that add and remove holds, so a reservation's limits are
 * checked in the same round as its funds, however deep the backlog; a
 * settlement charges at most hold + available and records the rest in
 * `shortfalls` by the same write. That map is also what a repeated settle
 * answers from (see resolveRepeats).
 */
export class CassandraLedger implements Ledger {
  private readonly queues = new Map<string, Pending[]>();
  /** Per account: the queue length its next round is waiting for, and how to start it (see RoundSizes). */
  private readonly gathering = new Map<string, { target: number; done(): void }>();
  /** Per account: the journal version known to be copied into ledger_rounds, and a copy under way. */
  private readonly copied = new Map<string, { version: string; done: Promise<void> }>();
  /** Per account: the day this process last added to ledger_days_by_account. */
  private readonly days = new Map<string, number>();
  /**
   * Per account: the money row as this process's last round wrote it, and
   * the holds it knows. The next round starts from it instead of reading the
   * row again (a serial read is a Paxos round of its own); a round that finds
   * the row changed by another writer (its version check fails) reads it.
   */
  private readonly written: WrittenRows;

  constructor(
    private readonly client: CassandraClient,
    private readonly now: () => number = Date.now,
    /** Compare-and-set conflicts and writes of unknown outcome resolved. */
    private readonly telemetry: Telemetry = noTelemetry,
    /** Holds the kept rows may know in all (MAX_WRITTEN_HOLDS). */
    maxWrittenHolds = MAX_WRITTEN_HOLDS,
  ) {
    this.written = new WrittenRows(maxWrittenHolds);
  }

  async createAccount(accountId: string, name: string, initialBalance: Money): Promise<void> {
    // An account of the table before version 10 is moved here by its first operation: its id is taken.
    if ((await this.client.execute("SELECT account_id FROM accounts WHERE account_id = ?", [accountId])).rowLength > 0) {
      throw new Error(`account ${accountId} exists`);
    }
    const at = this.now();
    const entries: JournalEntry[] = initialBalance > 0n
      ? [{ seq: "0", type: "credit", amount: initialBalance.toString(), balanceAfter: initialBalance.toString(), reservedChange: "0", reservedAfter: "0", at }]
      : [];
    const journal: Journal = { version: "0", entries };
    const result = await conditional(
      this.client,
      "INSERT INTO account_ledger (account_id, hold_id, name, created_at, balance, reserved, version, journal, open_holds) VALUES (?, ?, ?, ?, ?, 0, 0, ?, 0) IF NOT EXISTS",
      [accountId, MONEY, name, new Date(at), initialBalance, JSON.stringify(journal)],
    );
    if (!result.applied) throw new Error(`account ${accountId} exists`);
    this.copyInBackground(accountId, journal);
  }

  async credit(accountId: string, amount: Money): Promise<BalanceSnapshot | undefined> {
    const outcome = await this.enqueue(accountId, { kind: "credit", amount });
    return outcome === "unknown_account" ? undefined : this.balance(accountId);
  }

  async balance(accountId: string): Promise<BalanceSnapshot | undefined> {
    const row = await this.moneyRow(accountId, "balance, reserved");
    return row ? { balance: row.balance as bigint, reserved: row.reserved as bigint } : undefined;
  }

  async reserve(accountId: string, reservationId: string, amount: Money, options?: ReserveOptions): Promise<ReserveOutcome> {
    return (await this.enqueue(accountId, { kind: "reserve", reservationId, amount, options })) as ReserveOutcome;
  }

  async settle(accountId: string, reservationId: string, amount: Money, tokens?: SettledTokens): Promise<Settlement | undefined> {
    const outcome = await this.enqueue(accountId, { kind: "settle", reservationId, amount, tokens });
    return typeof outcome === "object" && "charged" in outcome ? outcome : undefined;
  }

  async release(accountId: string, reservationId: string, reason?: ReleaseReason): Promise<void> {
    await this.enqueue(accountId, { kind: "release", reservationId, ...(reason !== undefined && { reason }) });
  }

  async shortfalls(accountId: string): Promise<Shortfall[]> {
    const row = await this.moneyRow(accountId, "shortfalls");
    const recorded = (row?.shortfalls as Record<string, bigint> | null | undefined) ?? {};
    return Object.entries(recorded).map(([reservationId, amount]) => ({ reservationId, amount }));
  }

  async hasAnyAccount(): Promise<boolean> {
    return (
      (await this.client.execute("SELECT account_id FROM account_ledger LIMIT 1")).rowLength > 0 ||
      (await this.client.execute("SELECT account_id FROM accounts LIMIT 1")).rowLength > 0
    );
  }

  async keyAccount(accountId: string, keyId: string): Promise<KeyAccount> {
    const state = await this.read(accountId);
    if (!state) return { spending: NO_SPENDING, held: 0n, openJobs: 0 };
    return { spending: spendingOf(state, keyId), ...keyHolds(state, keyId) };
  }

  /**
   * Columns of the account's money row (of its row in `accounts` while it
   * has not moved yet), or undefined for an unknown account. Serial when the
   * answer decides money (LOCAL_SERIAL completes a round in flight).
   */
  private async moneyRow(accountId: string, columns: string, serial = false): Promise<Row | undefined> {
    const read = (query: string, params: unknown[]) =>
      serial ? serialRead(this.client, query, params) : this.client.execute(query, params).then((r) => r.first() ?? undefined);
    return (
      (await read(`SELECT ${columns} FROM account_ledger WHERE account_id = ? AND hold_id = ?`, [accountId, MONEY])) ??
      (await read(`SELECT ${columns} FROM accounts WHERE account_id = ?`, [accountId]))
    );
  }

  /**
   * Newest first. The row's current journal is copied first (it may not be
   * yet: its writer may have died right after writing it), then the days
   * that hold entries are read newest first, each a slice below the cursor.
   */
  async entries(query: LedgerEntryQuery): Promise<LedgerEntryPage> {
    const row = await this.moneyRow(query.accountId, "journal", true);
    if (!row) return { entries: [] };
    const journal = parseJournal(row.journal);
    if (journal) await this.ensureCopied(query.accountId, journal);
    const top = query.before?.at.getTime() ?? (query.to ? query.to.getTime() - 1 : Number.MAX_SAFE_INTEGER);
    const bottom = query.from?.getTime() ?? 0;
    const days = (
      await this.client.execute(
        "SELECT day FROM ledger_days_by_account WHERE account_id = ? AND day <= ? AND day >= ?",
        [query.accountId, dayOf(Math.min(top, 8.64e15)), dayOf(bottom)],
      )
    ).rows.map((r) => r.day as number);
    const entries: LedgerEntry[] = [];
    let read = 0;
    let last: LedgerCursor | undefined = query.before;
    for (const day of days) {
      for await (const entry of this.dayEntries(query.accountId, day, last?.seq)) {
        if (read >= MAX_ROWS_PER_PAGE) return { entries, next: last };
        read++;
        // Times never decrease along seq: below `from`, nothing older can match.
        if (query.from && entry.at < query.from) return { entries };
        if (!(query.to && entry.at >= query.to)) {
          if (entries.length === query.limit) return { entries, next: last };
          entries.push(entry);
        }
        last = { seq: entry.seq, at: entry.at };
      }
    }
    return { entries };
  }

  /**
   * A day's entries, newest first, below `belowSeq`: its rounds' (ledger_rounds),
   * then those copied one by one before version 12 (ledger_entries), which are
   * older than any round copied whole.
   */
  private async *dayEntries(accountId: string, day: number, belowSeq: bigint | undefined): AsyncGenerator<LedgerEntry> {
    // The round that made an entry has version seq / SEQ_PER_VERSION: none above the cursor's can hold an entry below it.
    let version = belowSeq === undefined ? undefined : belowSeq / SEQ_PER_VERSION;
    for (;;) {
      const below = version === undefined ? "" : " AND version <= ?";
      const params: unknown[] = [accountId, day, ...(version === undefined ? [] : [version]), ROUNDS_PER_READ];
      const rows = (await this.client.execute(`SELECT version, journal FROM ledger_rounds WHERE account_id = ? AND day = ?${below} LIMIT ?`, params)).rows;
      for (const row of rows) {
        const journal = parseJournal(row.journal)!;
        for (let i = journal.entries.length - 1; i >= 0; i--) {
          const entry = ledgerEntryOf(journal.entries[i]!);
          if (belowSeq === undefined || entry.seq < belowSeq) yield entry;
        }
        version = (row.version as bigint) - 1n;
      }
      if (rows.length < ROUNDS_PER_READ) break;
    }
    let last = belowSeq;
    for (;;) {
      const below = last === undefined ? "" : " AND seq < ?";
      const params: unknown[] = [accountId, day, ...(last === undefined ? [] : [last]), ENTRIES_PER_READ];
      const rows = (await this.client.execute(`SELECT ${ENTRY_COLUMNS} FROM ledger_entries WHERE account_id = ? AND day = ?${below} LIMIT ?`, params)).rows;
      for (const row of rows) {
        const entry = entryOf(row);
        last = entry.seq;
        yield entry;
      }
      if (rows.length < ENTRIES_PER_READ) break; // this day is read to its end
    }
  }

  /** Copies a journal into ledger_rounds unless this process knows it is there. */
  private async ensureCopied(accountId: string, journal: Journal): Promise<void> {
    const known = this.copied.get(accountId);
    if (known?.version === journal.version) {
      try {
        return await known.done;
      } catch {
        // the copy failed: do it again below
      }
    }
    const done = this.copy(accountId, journal);
    this.remember(accountId, journal.version, done);
    await done;
  }

  private copyInBackground(accountId: string, journal: Journal): void {
    const done = this.copy(accountId, journal);
    done.catch(() => undefined); // whoever needs it next copies it again
    this.remember(accountId, journal.version, done);
  }

  private remember(accountId: string, version: string, done: Promise<void>): void {
    if (this.copied.size > 100_000) this.copied.clear();
    this.copied.set(accountId, { version, done });
  }

  /**
   * Writes a journal into ledger_rounds: one row per day its entries fall on
   * (one, but for a journal carried forward from before the statement), and
   * the day into the account's days once per process.
   */
  private async copy(accountId: string, journal: Journal): Promise<void> {
    const days = new Map<number, JournalEntry[]>();
    for (const entry of journal.entries) {
      const day = days.get(dayOf(entry.at));
      if (day) day.push(entry);
      else days.set(dayOf(entry.at), [entry]);
    }
    await Promise.all(
      [...days].map(([day, entries]) =>
        Promise.all([
          this.recordDay(accountId, day),
          this.client.execute("INSERT INTO ledger_rounds (account_id, day, version, journal) VALUES (?, ?, ?, ?)", [
            accountId, day, BigInt(journal.version), days.size === 1 ? JSON.stringify(journal) : JSON.stringify({ version: journal.version, entries }),
          ]),
        ]),
      ),
    );
  }

  /** Adds the day to the account's days, unless this process did (a row each round would be a write each round). */
  private async recordDay(accountId: string, day: number): Promise<void> {
    if (this.days.get(accountId) === day) return;
    await this.client.execute("INSERT INTO ledger_days_by_account (account_id, day) VALUES (?, ?)", [accountId, day]);
    if (this.days.size > 100_000) this.days.clear();
    this.days.set(accountId, day);
  }

  private enqueue(accountId: string, operation: Operation): Promise<Outcome> {
    return new Promise((resolve, reject) => {
      if (operation.kind !== "credit" && operation.reservationId === MONEY) return reject(new Error("a reservation id is never empty (it names the money row)"));
      const queue = this.queues.get(accountId);
      const pending = { id: newOperationId(), operation, resolve, reject };
      if (queue) {
        queue.push(pending);
        const gathering = this.gathering.get(accountId);
        if (gathering && queue.length >= gathering.target) gathering.done();
        return;
      }
      this.queues.set(accountId, [pending]);
      // Wait one turn of the event loop so that operations arriving together share the first round too.
      setImmediate(() => void this.drain(accountId));
    });
  }

  private async drain(accountId: string): Promise<void> {
    const queue = this.queues.get(accountId)!;
    const rounds = new RoundSizes();
    while (queue.length > 0) {
      const wait = rounds.gatherFor(queue.length);
      if (wait) await this.gather(accountId, wait.target, wait.ms);
      const batch = queue.splice(0, MAX_BATCH);
      const started = performance.now();
      let outcomes: Outcome[];
      try {
        outcomes = await this.commit(accountId, batch);
      } catch (error) {
        for (const pending of batch) pending.reject(error);
        continue;
      } finally {
        const ms = performance.now() - started;
        rounds.ended(batch.length, ms);
        this.telemetry.observe({ kind: "ledger_round", operations: batch.length, seconds: ms / 1000 });
      }
      await this.resolveRepeats(accountId, batch, outcomes);
      // One turn for the callers just answered to ask again: they join the next round instead of following it alone.
      await new Promise(setImmediate);
    }
    this.queues.delete(accountId);
  }

  /** Waits until the account's queue holds `target` operations, or `ms` have passed. */
  private gather(accountId: string, target: number, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.gathering.delete(accountId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.gathering.set(accountId, { target, done });
    });
  }

  /**
   * Answers the batch. A settle that found its hold already ended is a repeat
   * (the reaper after a crash): it answers the settlement recorded, which the
   * row keeps for a capped settlement (its shortfall: amount asked − shortfall
   * was charged); otherwise undefined (a settlement in full charged the amount
   * asked; or the hold was released, or never taken). A failure to read that
   * fails those settles only: the others' outcomes are known.
   */
  private async resolveRepeats(accountId: string, batch: readonly Pending[], outcomes: readonly Outcome[]): Promise<void> {
    let recorded: Record<string, bigint> | undefined;
    let readError: unknown;
    if (outcomes.includes("no_hold")) {
      try {
        const row = await this.moneyRow(accountId, "shortfalls", true);
        recorded = (row?.shortfalls as Record<string, bigint> | null | undefined) ?? {};
      } catch (error) {
        readError = error;
      }
    }
    batch.forEach((pending, i) => {
      const outcome = outcomes[i]!;
      if (outcome !== "no_hold") return pending.resolve(outcome);
      if (!recorded) return pending.reject(readError);
      const operation = pending.operation as Extract<Operation, { kind: "settle" }>;
      const shortfall = recorded[operation.reservationId];
      if (shortfall === undefined) return pending.resolve("done");
      const charged = operation.amount > shortfall ? operation.amount - shortfall : 0n;
      pending.resolve({ charged, shortfall, repeated: true });
    });
  }

  /**
   * The account's money row, read serially, with no hold known; an account
   * still in `accounts` (from before version 10) is moved here first.
   */
  private async read(accountId: string): Promise<AccountState | undefined> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const row = await serialRead(
        this.client,
        "SELECT balance, reserved, version, journal, key_spending, key_holds, open_holds, open_counts FROM account_ledger WHERE account_id = ? AND hold_id = ?",
        [accountId, MONEY],
      );
      if (row) return stateOf(row);
      if (!(await this.move(accountId))) return undefined;
    }
    throw new DependencyUnavailableError("cassandra", `account ${accountId}: its move to account_ledger did not complete`);
  }

  /**
   * Moves an account of `accounts` (written before version 10) into
   * account_ledger: its money into the money row, each open hold into a row,
   * and the tallies counted from them, in one conditional batch (IF NOT EXISTS
   * on the money row: a second mover changes nothing). A row from before the
   * statement gets its history carried forward as the journal of its version:
   * a credit of its balance and a hold per open hold. False when there is no
   * such account.
   */
  private async move(accountId: string): Promise<boolean> {
    const old = await serialRead(
      this.client,
      "SELECT name, created_at, balance, reserved, holds, hold_memos, version, journal, key_spending, shortfalls FROM accounts WHERE account_id = ?",
      [accountId],
    );
    if (!old) return false;
    const holds = Object.entries((old.holds as Record<string, bigint> | null) ?? {});
    const memos = (old.hold_memos as Record<string, string> | null) ?? {};
    const balance = old.balance as bigint;
    const version = old.version as bigint;
    let journal = parseJournal(old.journal);
    if (!journal) {
      const at = this.now();
      const entries: JournalEntry[] = [];
      const seqBase = version * SEQ_PER_VERSION;
      const add = (type: LedgerEntryType, amount: Money, reservedChange: Money, reservedAfter: Money, memo?: string) =>
        entries.push({
          seq: (seqBase + BigInt(entries.length)).toString(), type, amount: amount.toString(), balanceAfter: balance.toString(),
          reservedChange: reservedChange.toString(), reservedAfter: reservedAfter.toString(), ...(memo ? { memo: JSON.parse(memo) as HoldMemo } : {}), at,
        });
      if (balance !== 0n) add("credit", balance, 0n, 0n);
      let reserved = 0n;
      for (const [id, amount] of holds) add("hold", 0n, amount, (reserved += amount), memos[id]);
      journal = { version: version.toString(), entries };
    }
    const tallies: AccountState = {
      balance, reserved: 0n, version, journal, keys: new Map(), keyHolds: new Map(), openHolds: 0, openCounts: new Map(), holds: new Map(),
    };
    for (const [id, amount] of holds) tally(tallies, id, { amount, memo: memos[id] }, 1);
    const statics =
      "INSERT INTO account_ledger (account_id, hold_id, name, created_at, balance, reserved, version, journal, key_spending, key_holds, open_holds, shortfalls) " +
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS";
    try {
      await conditionalBatch(this.client, [
        {
          query: statics,
          params: [
            accountId, MONEY, old.name, old.created_at, balance, old.reserved, version, JSON.stringify(journal), old.key_spending ?? {},
            keyHoldsColumn(tallies), tallies.openHolds, old.shortfalls ?? {},
          ],
        },
        ...holds.map(([id, amount]) => ({
          query: "INSERT INTO account_ledger (account_id, hold_id, amount, memo) VALUES (?, ?, ?, ?)",
          params: [accountId, id, amount, memos[id] ?? null],
        })),
      ]);
    } catch (error) {
      if (!(error instanceof AmbiguousWriteError)) throw error;
      // The serial read that follows completes it, or finds it missing and moves again.
    }
    return true;
  }

  /**
   * Reads the named hold rows into the state, with the money row in the same
   * read. False when it is of another version than the state's (another
   * writer changed the account since): the state is stale. Not serial: a
   * round's version check proves what it read.
   */
  private async readHolds(accountId: string, state: AccountState, ids: readonly string[]): Promise<boolean> {
    const rows = (await this.client.execute("SELECT hold_id, version, amount, memo FROM account_ledger WHERE account_id = ? AND hold_id IN ?", [accountId, [MONEY, ...ids]])).rows;
    for (const id of ids) state.holds.set(id, null);
    let current = false;
    for (const row of rows) {
      if (row.hold_id === MONEY) current = row.version === state.version;
      else state.holds.set(row.hold_id as string, holdOf(row));
    }
    return current;
  }

  /**
   * Counts the holds an open-hold rule counts, from the hold rows (once per
   * rule and account: the rounds keep the count from then on). It reads only
   * the ids the rule counts (its prefix, less the excepted one), so the
   * tombstones of ended holds it does not count (text calls, for the job
   * rule) are skipped, not read. The pages are read one after another, not at
   * one moment: the round writes, and its version check proves the count (see
   * commit).
   */
  private async countHolds(accountId: string, state: AccountState, key: string): Promise<void> {
    const [counted, except] = ruleOf(key);
    const slices: [string, string | undefined][] =
      except !== null && except.startsWith(counted) && except !== counted
        ? [[counted, except], [after(except)!, after(counted)]]
        : [[counted, after(counted)]];
    let open = 0;
    for (const [from, to] of slices) {
      if (to !== undefined && to <= from) continue;
      // From the prefix on (above the money row, '', for the empty prefix), below the least id past it.
      const query = `SELECT hold_id FROM account_ledger WHERE account_id = ? AND hold_id ${from === MONEY ? ">" : ">="} ?${to === undefined ? "" : " AND hold_id < ?"}`;
      let pageState: string | undefined;
      do {
        const page = await this.client.execute(query, [accountId, from, ...(to === undefined ? [] : [to])], {
          fetchSize: 5_000, ...(pageState ? { pageState } : {}),
        });
        for (const row of page.rows) if (countsAsOpenHold(row.hold_id as string, counted, except ?? undefined)) open++;
        pageState = page.pageState ?? undefined;
      } while (pageState);
    }
    state.openCounts.set(key, open);
  }

  /**
   * Applies the batch to the state; returns each operation's outcome, the ids
   * of the operations that changed something, the shortfalls the batch's
   * settlements recorded, the hold rows it touched, and the reservations
   * refused whose id was not read (an open hold of that id would make the
   * answer "reserved": the round must read them and judge again).
   */
  private static apply(state: AccountState, batch: readonly Pending[], now: number) {
    const touched: TouchedHolds = new Map();
    const touch = (id: string) => {
      if (touched.has(id)) return;
      const known = state.holds.get(id);
      touched.set(id, known ? "open" : known === null ? "absent" : "assumed");
    };
    const outcomes: Outcome[] = [];
    const changed: string[] = [];
    const shortfalls: Record<string, Money> = {};
    const entries: JournalEntry[] = [];
    const unsure: string[] = [];
    const seqBase = (state.version + 1n) * SEQ_PER_VERSION;
    // Entry times never go back along an account's entries (they order its statement and bucket its days).
    const at = Math.max(now, state.journal?.entries.at(-1)?.at ?? 0);
    const record = (
      op: string, type: LedgerEntryType, amount: Money, reservedChange: Money, memo?: HoldMemo, tokens?: SettledTokens, reason?: ReleaseReason,
    ) => {
      entries.push({
        seq: (seqBase + BigInt(entries.length)).toString(), type, amount: amount.toString(), balanceAfter: state.balance.toString(),
        reservedChange: reservedChange.toString(), reservedAfter: state.reserved.toString(), ...(memo ? { memo } : {}), ...(tokens ? { tokens } : {}),
        ...(reason !== undefined ? { reason } : {}), at, op,
      });
    };
    for (const { id, operation } of batch) {
      switch (operation.kind) {
        case "reserve": {
          let refusal: KeyRefusal | undefined;
          const cap = operation.options?.maxOpenHolds;
          const known = state.holds.get(operation.reservationId);
          if (known) {
            outcomes.push("reserved");
            break;
          }
          if (cap && state.openCounts.get(ruleKey(cap.countedPrefix, cap.exceptPrefix))! >= cap.limit) {
            outcomes.push("too_many_open_holds");
          } else if (state.balance - state.reserved < operation.amount) {
            outcomes.push("insufficient_funds");
          } else if (operation.options?.key && (refusal = CassandraLedger.keyRefusal(state, operation.amount, operation.options.key, now))) {
            outcomes.push({ key: refusal });
          } else {
            const key = operation.options?.key;
            if (key?.limits.ratePerMinute !== undefined) state.keys.set(key.keyId, encodeKeySpending(countReservation(spendingOf(state, key.keyId), new Date(now))));
            touch(operation.reservationId);
            const memo = operation.options?.memo;
            const hold: Hold = { amount: operation.amount, ...(memo ? { memo: JSON.stringify(memo) } : {}) };
            state.holds.set(operation.reservationId, hold);
            state.reserved += operation.amount;
            tally(state, operation.reservationId, hold, 1);
            record(id, "hold", 0n, operation.amount, memo);
            outcomes.push("reserved");
            changed.push(id);
            break;
          }
          if (known === undefined) unsure.push(operation.reservationId);
          break;
        }
        case "settle":
        case "release": {
          const held = state.holds.get(operation.reservationId);
          if (!held) {
            outcomes.push(operation.kind === "settle" ? "no_hold" : "done");
            break;
          }
          // Bounded before the hold leaves `reserved`: at most hold + available is charged.
          const settlement = operation.kind === "settle" ? boundedCharge(operation.amount, held.amount, state) : undefined;
          const memo = held.memo === undefined ? undefined : (JSON.parse(held.memo) as HoldMemo);
          touch(operation.reservationId);
          state.holds.set(operation.reservationId, null);
          state.reserved -= held.amount;
          tally(state, operation.reservationId, held, -1);
          if (settlement) {
            state.balance -= settlement.charged;
            if (settlement.shortfall > 0n) shortfalls[operation.reservationId] = settlement.shortfall;
            if (memo?.keyId !== undefined) state.keys.set(memo.keyId, encodeKeySpending(countCharge(spendingOf(state, memo.keyId), settlement.charged, new Date(now))));
            record(id, "charge", -settlement.charged, -held.amount, memo, operation.kind === "settle" ? operation.tokens : undefined);
          } else {
            record(id, "release", 0n, -held.amount, memo, undefined, operation.kind === "release" ? operation.reason : undefined);
          }
          changed.push(id);
          outcomes.push(settlement ?? "done");
          break;
        }
        case "credit":
          state.balance += operation.amount;
          record(id, "credit", operation.amount, 0n);
          changed.push(id);
          outcomes.push("done");
          break;
      }
    }
    return { outcomes, changed, shortfalls, entries, touched, unsure };
  }

  private static keyRefusal(state: AccountState, amount: Money, key: KeyReservation, now: number) {
    return keyAdmission(key.limits, spendingOf(state, key.keyId), keyHolds(state, key.keyId), amount, key.isJob, new Date(now));
  }

  /**
   * Gets the state ready for the batch: reads the hold rows it names that the
   * state does not know (a settlement's or release's hold; a reservation's
   * too when `readReservations`, after a round that could not be sure of
   * them) and counts the open-hold rules it asks for that the row does not
   * count yet (0 when no hold is open). "stale" when what it read is of a
   * newer version; "counted" when it counted a rule from the hold rows.
   */
  private async prepare(accountId: string, state: AccountState, batch: readonly Pending[], readReservations: boolean): Promise<"ready" | "counted" | "stale"> {
    const unknown = new Set<string>();
    for (const { operation } of batch) {
      if (operation.kind === "credit" || state.holds.has(operation.reservationId)) continue;
      if (operation.kind !== "reserve" || readReservations) unknown.add(operation.reservationId);
    }
    if (unknown.size > 0 && !(await this.readHolds(accountId, state, [...unknown]))) return "stale";
    let counted = false;
    for (const { operation } of batch) {
      const cap = operation.kind === "reserve" ? operation.options?.maxOpenHolds : undefined;
      const key = cap && ruleKey(cap.countedPrefix, cap.exceptPrefix);
      if (!key || state.openCounts.has(key)) continue;
      if (state.openHolds === 0) {
        state.openCounts.set(key, 0);
      } else {
        await this.countHolds(accountId, state, key);
        counted = true;
      }
    }
    return counted ? "counted" : "ready";
  }

  private async commit(accountId: string, batch: readonly Pending[]): Promise<Outcome[]> {
    let readReservations = false;
    /** The account as the last lost round found it (as fresh as a serial read). */
    let found: AccountState | undefined;
    /** An attempt whose answer was lost: the version it would have written, and the day of its entries. */
    let lost: { version: bigint; day: number } | undefined;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      // Taken out while the round runs: put back only as the row this round leaves.
      const known = this.written.take(accountId);
      const state = found ?? known ?? (await this.read(accountId));
      found = undefined;
      if (!state) return batch.map(() => "unknown_account");
      if (lost) {
        // Read serially after the loss (a serial read completes any round in flight): the attempt's fate is decided.
        const journal = await this.journalOf(accountId, state, lost.version, lost.day);
        lost = undefined;
        if (journal && madeBy(journal, batch).size > 0) {
          this.telemetry.observe({ kind: "ledger_outcome_resolved" });
          return this.replay(accountId, batch, state, journal);
        }
      }
      const prepared = await this.prepare(accountId, state, batch, readReservations);
      if (prepared === "stale") {
        // Another writer changed the account while this round read it: as a lost round.
        this.telemetry.observe({ kind: "ledger_conflict" });
        await backOff(attempt);
        continue;
      }
      const before = state.version;
      // The journal this write replaces must be in ledger_rounds first (its writer may have died before copying it).
      const previous = state.journal;
      if (previous) await this.ensureCopied(accountId, previous);
      const { outcomes, changed, shortfalls, entries, touched, unsure } = CassandraLedger.apply(state, batch, this.now());
      if (unsure.length > 0) {
        // A refusal of a reservation whose hold may be open (a repeat): judged again with its hold row read.
        readReservations = true;
        continue;
      }
      // A rule counted from pages read one after another is proved by this round's write: written even when nothing else is.
      if (changed.length === 0 && prepared === "ready") {
        // Nothing to write, so no version check would tell whether the row this was judged on is still the row:
        // a refusal judged on the row this process last wrote is judged again on the row as read now.
        if (state === known) continue;
        this.written.keep(accountId, state);
        return outcomes;
      }
      const holds = holdWrites(accountId, state, touched);
      const journal: Journal = { version: (before + 1n).toString(), entries };
      // Shortfalls are added to the row by the same conditional write that charges.
      const writes = [
        {
          query:
            "UPDATE account_ledger SET balance = ?, reserved = ?, journal = ?, key_spending = ?, key_holds = ?, open_holds = ?, open_counts = ?, version = ?, " +
            "shortfalls = shortfalls + ? WHERE account_id = ? AND hold_id = ? IF version = ?",
          params: [
            state.balance, state.reserved, JSON.stringify(journal), Object.fromEntries(state.keys),
            keyHoldsColumn(state), state.openHolds, Object.fromEntries(state.openCounts),
            before + 1n, shortfalls, accountId, MONEY, before,
          ],
        },
        ...holds.writes,
      ];
      try {
        const result = writes.length === 1 ? await conditional(this.client, writes[0]!.query, writes[0]!.params) : await conditionalBatch(this.client, writes);
        if (result.applied) {
          this.copyInBackground(accountId, journal);
          for (const [id, hold] of state.holds) if (hold === null) state.holds.delete(id);
          this.written.keep(accountId, { ...state, version: before + 1n, journal });
          return outcomes;
        }
        // Another writer moved the money row, or a new reservation's hold was open after all: the next round starts from the
        // rows this one found (no read), knowing the holds it named.
        found = stateAfterLoss(result.rows ?? [], holds.named);
        this.telemetry.observe({ kind: "ledger_conflict" });
        // At once: what the lost round found ages with every pause, and the winner keeps writing.
        if (found) continue;
      } catch (error) {
        if (!(error instanceof AmbiguousWriteError)) throw error;
        // The next round reads serially, which completes this write if it is in flight, and looks for its entries.
        if (entries.length > 0) lost = { version: before + 1n, day: dayOf(entries[0]!.at) };
      }
      await backOff(attempt);
    }
    // Other writers won every round: a moment's overload of this account, not a fault (503 with Retry-After, never 500).
    throw new DependencyUnavailableError("cassandra", `account ${accountId}: too much contention, gave up after ${MAX_ATTEMPTS} attempts`);
  }

  /**
   * The journal of `version`, given the account as read serially: the money
   * row's while it is the newest, else its copy in ledger_rounds (a journal is
   * copied before a write replaces it), on the day its entries were made. An
   * attempt whose entries it holds was applied. Undefined when the account
   * never reached that version (the attempt was not applied) or when its
   * version was written by another round on another day.
   */
  private async journalOf(accountId: string, state: AccountState, version: bigint, day: number): Promise<Journal | undefined> {
    if (state.version < version) return undefined;
    if (state.version === version) return state.journal ?? undefined;
    const row = (await this.client.execute("SELECT journal FROM ledger_rounds WHERE account_id = ? AND day = ? AND version = ?", [accountId, day, version])).first();
    return parseJournal(row?.journal) ?? undefined;
  }

  /**
   * The batch was applied by an attempt whose answer was lost, and `journal`
   * is what it wrote. Recomputing its outcomes against today's state would be
   * wrong: an operation changed something exactly when the journal holds its
   * entry; a reservation without one was refused, or found its hold open (a
   * repeat); a settlement's entry says what it charged.
   */
  private async replay(accountId: string, batch: readonly Pending[], state: AccountState, journal: Journal): Promise<Outcome[]> {
    const made = madeBy(journal, batch);
    const reservations = batch.flatMap(({ id, operation }) => (operation.kind === "reserve" && !made.has(id) ? [operation.reservationId] : []));
    // Read at the state's version: a serial read just completed every round in flight, and this account's queue is ours.
    if (reservations.length > 0) await this.readHolds(accountId, state, reservations);
    return batch.map(({ id, operation }): Outcome => {
      const entry = made.get(id);
      switch (operation.kind) {
        case "reserve": {
          if (entry || state.holds.get(operation.reservationId)) return "reserved";
          // Refused by a key limit: the state that refused it is gone; judged again on today's (refused either way).
          if (operation.options?.key && state.balance - state.reserved >= operation.amount) {
            const refusal = CassandraLedger.keyRefusal(state, operation.amount, operation.options.key, Date.now());
            if (refusal) return { key: refusal };
          }
          // Refused: for the open-hold limit or for funds; a refusal of either kind reserved nothing.
          const cap = operation.options?.maxOpenHolds;
          const counted = cap && state.openCounts.get(ruleKey(cap.countedPrefix, cap.exceptPrefix));
          return cap && counted !== undefined && counted >= cap.limit ? "too_many_open_holds" : "insufficient_funds";
        }
        case "settle": {
          if (!entry) return "no_hold"; // it found no hold: a repeat
          const charged = -BigInt(entry.amount);
          return { charged, shortfall: operation.amount - charged };
        }
        default:
          return "done";
      }
    });
  }
}

/** The entries of the batch's operations in a journal, by operation id. */
function madeBy(journal: Journal, batch: readonly Pending[]): Map<string, JournalEntry> {
  const ids = new Set(batch.map((p) => p.id));
  return new Map(journal.entries.flatMap((entry) => (entry.op !== undefined && ids.has(entry.op) ? [[entry.op, entry] as const] : [])));
}

/**
 * The hold rows a round writes: each hold it leaves open, each hold that was
 * open and is no longer deleted. A hold taken and ended in one round whose row
 * was absent leaves nothing to write. Each write has a condition: a new row IF
 * NOT EXISTS (the one a round assumed absent without reading it decides the
 * round), the others IF EXISTS (true whenever the money row's version is), so
 * that a lost round answers every row it named (see stateAfterLoss).
 */
function holdWrites(accountId: string, state: AccountState, touched: TouchedHolds) {
  const writes: { query: string; params: unknown[] }[] = [];
  const named: string[] = [];
  for (const [id, before] of touched) {
    const hold = state.holds.get(id);
    if (hold && before === "open") {
      writes.push({ query: "UPDATE account_ledger SET amount = ?, memo = ? WHERE account_id = ? AND hold_id = ? IF EXISTS", params: [hold.amount, hold.memo ?? null, accountId, id] });
    } else if (hold) {
      writes.push({ query: "INSERT INTO account_ledger (account_id, hold_id, amount, memo) VALUES (?, ?, ?, ?) IF NOT EXISTS", params: [accountId, id, hold.amount, hold.memo ?? null] });
    } else if (before === "open") {
      writes.push({ query: "DELETE FROM account_ledger WHERE account_id = ? AND hold_id = ? IF EXISTS", params: [accountId, id] });
    } else {
      continue;
    }
    named.push(id);
  }
  return { writes, named };
}

/** An account's state from its money row, with no hold known. */
function stateOf(row: Row): AccountState {
  return {
    balance: row.balance as bigint,
    reserved: row.reserved as bigint,
    version: row.version as bigint,
    journal: parseJournal(row.journal),
    keys: new Map(Object.entries((row.key_spending as Record<string, string> | null) ?? {})),
    keyHolds: new Map(Object.entries((row.key_holds as Record<string, string> | null) ?? {}).map(([key, text]) => [key, decodeKeyHolds(text)])),
    openHolds: row.open_holds as number,
    openCounts: new Map(Object.entries((row.open_counts as Record<string, number> | null) ?? {})),
    holds: new Map(),
  };
}

/**
 * The account as a lost round found it: a failed conditional batch answers
 * the current rows its conditions name (the money row, whole, and each named
 * hold row that exists), as read by its Paxos round. Undefined without a
 * money row.
 */
function stateAfterLoss(rows: readonly Row[], named: readonly string[]): AccountState | undefined {
  const money = rows.find((row) => row.hold_id === MONEY);
  // Whole rows come back only when some statement of the batch is IF [NOT] EXISTS; otherwise only the version.
  if (!money || money.version === null || money.version === undefined || money.balance === undefined) return undefined;
  const state = stateOf(money);
  for (const id of named) state.holds.set(id, null);
  for (const row of rows) {
    if (row.hold_id !== MONEY) state.holds.set(row.hold_id as string, holdOf(row));
  }
  return state;
}

function parseJournal(value: unknown): Journal | null {
  return typeof value === "string" && value !== "" ? (JSON.parse(value) as Journal) : null;
}

/** An entry as a journal keeps it, as the statement gives it (the same shape as a ledger_entries row gives). */
function ledgerEntryOf(entry: JournalEntry): LedgerEntry {
  return {
    seq: BigInt(entry.seq),
    type: entry.type,
    amount: BigInt(entry.amount),
    balanceAfter: BigInt(entry.balanceAfter),
    reservedChange: BigInt(entry.reservedChange),
    reservedAfter: BigInt(entry.reservedAfter),
    memo: entry.memo === undefined ? undefined : { jobId: entry.memo.jobId, model: entry.memo.model, keyId: entry.memo.keyId },
    tokens: entry.tokens === undefined ? undefined : { promptTokens: entry.tokens.promptTokens, candidatesTokens: entry.tokens.candidatesTokens },
    reason: readReleaseReason(entry.reason),
    at: new Date(entry.at),
  };
}

function entryOf(row: Row): LedgerEntry {
  const model = row.model as string | null;
  const promptTokens = row.prompt_tokens as number | null;
  return {
    seq: row.seq as bigint,
    type: row.type as LedgerEntryType,
    amount: row.amount as bigint,
    balanceAfter: row.balance_after as bigint,
    reservedChange: row.reserved_change as bigint,
    reservedAfter: row.reserved_after as bigint,
    memo: model === null ? undefined : { jobId: (row.job_id as string | null) ?? undefined, model, keyId: (row.key_id as string | null) ?? undefined },
    tokens: promptTokens === null ? undefined : { promptTokens, candidatesTokens: (row.candidates_tokens as number | null) ?? 0 },
    reason: undefined, // copied before releases said why
    at: row.at as Date,
  };
}

function spendingOf(state: AccountState, keyId: string): KeySpending {
  const text = state.keys.get(keyId);
  return text === undefined ? NO_SPENDING : decodeKeySpending(text);
}

/** A key's open holds: their sum, and how many are jobs (a text call's memo names no job). */
function keyHolds(state: AccountState, keyId: string): KeyHolds {
  return state.keyHolds.get(keyId) ?? { held: 0n, openJobs: 0 };
}
