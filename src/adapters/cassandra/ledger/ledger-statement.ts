import { readReleaseReason } from "../../../domain/ledger/release-reasons.js";
import { auditWrites } from "../cassandra-audit-log.js";
import { decodeRecord } from "../audit-outbox.js";
import type { LedgerCursor, LedgerEntry, LedgerEntryPage, LedgerEntryQuery, LedgerEntryType } from "../../../ports/ledger.js";
import type { CassandraClient, Row } from "../cassandra-session.js";
import { dayOf, parseJournal, SEQ_PER_VERSION, type Journal, type JournalEntry } from "./account-state.js";
import type { LedgerRows } from "./ledger-rows.js";

/** Entry rows one statement page reads at most; a page of sparse matches ends early with a cursor. */
const MAX_ROWS_PER_PAGE = 1_000;
/** Rounds (ledger_rounds rows, up to MAX_BATCH entries each) one statement read asks for. */
const ROUNDS_PER_READ = 8;
/** Entries copied one by one (ledger_entries, before version 12) one statement read asks for. */
const ENTRIES_PER_READ = 200;
const ENTRY_COLUMNS =
  "seq, type, amount, balance_after, reserved_change, reserved_after, job_id, model, key_id, prompt_tokens, candidates_tokens, at";

/**
 * An account's statement: each round's journal (the entries it made, in the
 * money row) copied as one row into ledger_rounds before the next round
 * replaces it, the days that hold entries in ledger_days_by_account, and the
 * statement read back from them, newest first.
 */
export class LedgerStatement {
  /** Per account: the journal version known to be copied into ledger_rounds, and a copy under way. */
  private readonly copied = new Map<string, { version: string; done: Promise<void> }>();
  /** Per account: the day this process last added to ledger_days_by_account. */
  private readonly days = new Map<string, number>();

  constructor(private readonly client: CassandraClient, private readonly rows: LedgerRows) {}

  /**
   * Newest first. The row's current journal is copied first (it may not be
   * yet: its writer may have died right after writing it), then the days
   * that hold entries are read newest first, each a slice below the cursor.
   */
  async entries(query: LedgerEntryQuery): Promise<LedgerEntryPage> {
    const row = await this.rows.moneyRow(query.accountId, "journal", true);
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
    yield* this.roundEntries(accountId, day, belowSeq);
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

  /** A day's entries from its rounds (ledger_rounds), newest first, below `belowSeq`. */
  private async *roundEntries(accountId: string, day: number, belowSeq: bigint | undefined): AsyncGenerator<LedgerEntry> {
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
  }

  /** Copies a journal into ledger_rounds unless this process knows it is there. */
  async ensureCopied(accountId: string, journal: Journal): Promise<void> {
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

  copyInBackground(accountId: string, journal: Journal): void {
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
          // Audited credits' events, copied with their journal (again, to the same rows, when their writer did already).
          this.client.batch(entries.flatMap((entry) => (entry.audit === undefined ? [] : auditWrites(decodeRecord(entry.audit))))),
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
}

/** An entry as a journal keeps it, as the statement gives it (the same shape as a ledger_entries row gives). */
export function ledgerEntryOf(entry: JournalEntry): LedgerEntry {
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
    ...(entry.note !== undefined && { note: entry.note }),
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
