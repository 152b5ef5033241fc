import type { Money } from "../../../domain/money.js";
import { countsAsOpenHold } from "../../../domain/pricing/settlement.js";
import type { HoldMemo, LedgerEntryType } from "../../../ports/ledger.js";
import { DependencyUnavailableError } from "../../../ports/dependency.js";
import { AmbiguousWriteError, conditionalBatch, serialRead, type CassandraClient, type Row } from "../cassandra-session.js";
import {
  after, holdOf, isOnceRow, keyHoldsColumn, MONEY, onceEntryOf, onceRow, parseJournal, ruleOf, SEQ_PER_VERSION, stateOf, tally,
  type AccountState, type Journal, type JournalEntry, type TouchedHolds,
} from "./account-state.js";

/** A statement of a conditional batch. */
export interface Write {
  readonly query: string;
  readonly params: unknown[];
}

/**
 * An account's rows in account_ledger: the money row (hold_id '') and one
 * row per open hold. The reads a round makes, the writes it builds, and the
 * move of an account written before version 10 (the `accounts` table).
 */
export class LedgerRows {
  constructor(private readonly client: CassandraClient, private readonly now: () => number) {}

  /**
   * Columns of the account's money row (of its row in `accounts` while it
   * has not moved yet), or undefined for an unknown account. Serial when the
   * answer decides money (LOCAL_SERIAL completes a round in flight).
   */
  async moneyRow(accountId: string, columns: string, serial = false): Promise<Row | undefined> {
    const read = (query: string, params: unknown[]) =>
      serial ? serialRead(this.client, query, params) : this.client.execute(query, params).then((r) => r.first() ?? undefined);
    return (
      (await read(`SELECT ${columns} FROM account_ledger WHERE account_id = ? AND hold_id = ?`, [accountId, MONEY])) ??
      (await read(`SELECT ${columns} FROM accounts WHERE account_id = ?`, [accountId]))
    );
  }

  /**
   * The account's money row, read serially, with no hold known; an account
   * still in `accounts` (from before version 10) is moved here first.
   */
  async read(accountId: string): Promise<AccountState | undefined> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const row = await serialRead(
        this.client,
        "SELECT balance, reserved, version, journal, key_spending, key_holds, open_holds, open_counts, name, low_balance_threshold, low_balance " +
          "FROM account_ledger WHERE account_id = ? AND hold_id = ?",
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
    const journal = parseJournal(old.journal) ?? this.carriedForward(balance, version, holds, memos);
    const tallies: AccountState = {
      balance, reserved: 0n, version, journal, keys: new Map(), keyHolds: new Map(), openHolds: 0, openCounts: new Map(), holds: new Map(), once: new Map(),
      name: (old.name as string | null) ?? "", lowBalanceThreshold: undefined, lowBalance: false,
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

  /** The journal of an account from before the statement: a credit of its balance and a hold per open hold. */
  private carriedForward(balance: Money, version: bigint, holds: readonly [string, bigint][], memos: Record<string, string>): Journal {
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
    return { version: version.toString(), entries };
  }

  /**
   * Reads the named hold rows into the state, with the money row in the same
   * read. False when it is of another version than the state's (another
   * writer changed the account since): the state is stale. Not serial: a
   * round's version check proves what it read.
   */
  async readHolds(accountId: string, state: AccountState, ids: readonly string[]): Promise<boolean> {
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
   * Reads the once rows of the named operations into the state (decision 0039), with the money row in the same
   * read. False when the money row is of another version than the state's (as readHolds).
   */
  async readOnce(accountId: string, state: AccountState, operationIds: readonly string[]): Promise<boolean> {
    const rows = (await this.client.execute(
      "SELECT hold_id, version, entry FROM account_ledger WHERE account_id = ? AND hold_id IN ?", [accountId, [MONEY, ...operationIds.map(onceRow)]],
    )).rows;
    for (const id of operationIds) state.once.set(id, null);
    let current = false;
    for (const row of rows) {
      if (row.hold_id === MONEY) current = row.version === state.version;
      else state.once.set((row.hold_id as string).slice("once:".length), onceEntryOf(row));
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
   * LedgerRounds.commit).
   */
  async countHolds(accountId: string, state: AccountState, key: string): Promise<void> {
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
        for (const row of page.rows) if (!isOnceRow(row.hold_id as string) && countsAsOpenHold(row.hold_id as string, counted, except ?? undefined)) open++;
        pageState = page.pageState ?? undefined;
      } while (pageState);
    }
    state.openCounts.set(key, open);
  }

  /** The journal of `version` as copied into ledger_rounds on `day`, if it is there. */
  async copiedJournal(accountId: string, day: number, version: bigint): Promise<Journal | undefined> {
    const row = (await this.client.execute("SELECT journal FROM ledger_rounds WHERE account_id = ? AND day = ? AND version = ?", [accountId, day, version])).first();
    return parseJournal(row?.journal) ?? undefined;
  }
}

/**
 * A round's write of the money row: the state it leaves, at the next
 * version, on the condition that the row is still at `before`. Shortfalls
 * are added to the row by the same conditional write that charges.
 */
export function moneyRowWrite(
  accountId: string, state: AccountState, before: bigint, journal: Journal, shortfalls: Record<string, Money>, alerts: Record<string, string> = {},
): Write {
  return {
    query:
      "UPDATE account_ledger SET balance = ?, reserved = ?, journal = ?, key_spending = ?, key_holds = ?, open_holds = ?, open_counts = ?, version = ?, " +
      "shortfalls = shortfalls + ?, name = ?, low_balance_threshold = ?, low_balance = ?, balance_alerts = balance_alerts + ? " +
      "WHERE account_id = ? AND hold_id = ? IF version = ?",
    params: [
      state.balance, state.reserved, JSON.stringify(journal), Object.fromEntries(state.keys),
      keyHoldsColumn(state), state.openHolds, Object.fromEntries(state.openCounts),
      before + 1n, shortfalls, state.name, state.lowBalanceThreshold ?? null, state.lowBalance, alerts, accountId, MONEY, before,
    ],
  };
}

/**
 * The hold rows a round writes: each hold it leaves open, each hold that was
 * open and is no longer deleted. A hold taken and ended in one round whose row
 * was absent leaves nothing to write. Each write has a condition: a new row IF
 * NOT EXISTS (the one a round assumed absent without reading it decides the
 * round), the others IF EXISTS (true whenever the money row's version is), so
 * that a lost round answers every row it named (see stateAfterLoss).
 */
export function holdWrites(
  accountId: string, state: AccountState, touched: TouchedHolds, onceMade: readonly string[] = [],
): { writes: Write[]; named: string[] } {
  const writes: Write[] = [];
  const named: string[] = [];
  // The once rows of the named operations this round applied (decision 0039): a second write of one loses the round.
  for (const id of onceMade) {
    writes.push({
      query: "INSERT INTO account_ledger (account_id, hold_id, entry) VALUES (?, ?, ?) IF NOT EXISTS",
      // The entry without its audit event (copied out from the journal, never from here).
      params: [accountId, onceRow(id), JSON.stringify({ ...state.once.get(id), audit: undefined })],
    });
    named.push(onceRow(id));
  }
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
