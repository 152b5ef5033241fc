import type { Money } from "../../domain/money.js";
import type { AuditRecord } from "../../ports/audit-log.js";
import { SqliteAuditLog } from "./sqlite-audit-log.js";
import { readReleaseReason, type ReleaseReason } from "../../domain/ledger/release-reasons.js";
import { boundedCharge, countsAsOpenHold } from "../../domain/pricing/settlement.js";
import {
  admissionNeedsHolds, countCharge, countReservation, keyAdmission, NO_HOLDS, NO_SPENDING, type KeyHolds, type KeySpending,
} from "../../domain/accounts/key-limits.js";
import { decodeKeySpending, encodeKeySpending } from "../shared/key-limits-codec.js";
import type {
  AccountChange, AccountDetails, AccountListPage, AccountListQuery, AdjustOutcome, BalanceSnapshot, Credited, HoldMemo, KeyAccount, Ledger, LedgerEntry, LedgerEntryPage, LedgerEntryQuery,
  LedgerEntryType, ReserveOptions, ReserveOutcome, SettledTokens, Settlement, Shortfall,
} from "../../ports/ledger.js";
import { randomUUID } from "node:crypto";
import { accountNameKey } from "../../domain/accounts/account-listing.js";
import { lowBalanceTransition } from "../../domain/accounts/low-balance.js";
import type { BalanceAlert, BalanceAlertOutbox } from "../../ports/balance-alerts.js";
import { sqliteAccountList } from "./sqlite-account-list.js";
import { sqliteAccountSettings } from "./sqlite-account-settings.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";

interface AccountRow {
  balance: string;
  reserved: string;
  /** The low-balance threshold (migrations/0017): NULL for none. */
  low_balance_threshold: string | null;
  low_balance: number;
}

interface HoldRow {
  account_id: string;
  amount: string;
  state: "held" | "settled" | "released";
  /** What the settlement charged (set when settled). */
  charged: string | null;
  job_id: string | null;
  model: string | null;
  key_id: string | null;
}

interface EntryRow {
  entry_id: number;
  kind: LedgerEntryType;
  amount: string;
  balance_after: string;
  reserved_change: string;
  reserved_after: string;
  job_id: string | null;
  model: string | null;
  key_id: string | null;
  prompt_tokens: number | null;
  candidates_tokens: number | null;
  /** Why a release was made (migrations/0013); NULL elsewhere and on older releases. */
  reason: string | null;
  /** An adjustment's reason (migrations/0017); NULL elsewhere. */
  note: string | null;
  at: number;
}

/** An entry as the port shows it; the memo only where the entry belongs to a hold. */
function toEntry(row: EntryRow): LedgerEntry {
  return {
    seq: BigInt(row.entry_id),
    type: row.kind,
    amount: money(row.amount),
    balanceAfter: money(row.balance_after),
    reservedChange: money(row.reserved_change),
    reservedAfter: money(row.reserved_after),
    memo: row.model === null ? undefined : { jobId: row.job_id ?? undefined, model: row.model, keyId: row.key_id ?? undefined },
    tokens: row.prompt_tokens === null ? undefined : { promptTokens: row.prompt_tokens, candidatesTokens: row.candidates_tokens ?? 0 },
    reason: readReleaseReason(row.reason),
    ...(row.note !== null && { note: row.note }),
    at: new Date(row.at),
  };
}

/** Money columns are TEXT decimal strings of picodollars: exact at any size. */
const text = (amount: Money): string => amount.toString();
const money = (value: string): Money => BigInt(value);

/** Prepared statements of the ledger (tables of migrations/0001_initial.sql and 0002_ledger_shortfalls.sql). */
function ledgerStatements(db: SqliteDb) {
  return {
    account: db.prepare("SELECT balance, reserved, low_balance_threshold, low_balance FROM accounts WHERE account_id = ?"),
    setLowBalance: db.prepare("UPDATE accounts SET low_balance = ? WHERE account_id = ?"),
    insertAlert: db.prepare("INSERT INTO balance_alerts (alert_id, account_id, available, threshold, at) VALUES (?, ?, ?, ?, ?)"),
    anyAccount: db.prepare("SELECT 1 FROM accounts LIMIT 1").pluck(),
    insertAccount: db.prepare("INSERT INTO accounts (account_id, name, balance, reserved, created_at, name_key) VALUES (?, ?, ?, '0', ?, ?)"),
    setBalance: db.prepare("UPDATE accounts SET balance = ? WHERE account_id = ?"),
    setReserved: db.prepare("UPDATE accounts SET reserved = ? WHERE account_id = ?"),
    setBoth: db.prepare("UPDATE accounts SET balance = ?, reserved = ? WHERE account_id = ?"),
    hold: db.prepare("SELECT account_id, amount, state, charged, job_id, model, key_id FROM holds WHERE reservation_id = ?"),
    insertHold: db.prepare(
      "INSERT INTO holds (reservation_id, account_id, amount, state, created_at, job_id, model, key_id) VALUES (?, ?, ?, 'held', ?, ?, ?, ?)",
    ),
    endHold: db.prepare(
      "UPDATE holds SET state = ?, charged = ?, ended_at = ? WHERE reservation_id = ? AND state = 'held'",
    ),
    entry: db.prepare(
      `INSERT INTO ledger_entries (account_id, kind, amount, balance_after, reserved_change, reserved_after, reservation_id,
         job_id, model, key_id, prompt_tokens, candidates_tokens, reason, note, at)
       VALUES (@account_id, @kind, @amount, @balance_after, @reserved_change, @reserved_after, @reservation_id,
         @job_id, @model, @key_id, @prompt_tokens, @candidates_tokens, @reason, @note, @at)`,
    ),
    // The entry a named operation made (migration 0018, decision 0039), and the name set on the entry just made.
    entryOfOperation: db.prepare(
      `SELECT entry_id, kind, amount, balance_after, reserved_change, reserved_after, job_id, model, key_id, prompt_tokens, candidates_tokens,
         reason, note, at
       FROM ledger_entries WHERE account_id = ? AND operation_id = ?`,
    ),
    nameEntry: db.prepare("UPDATE ledger_entries SET operation_id = ? WHERE entry_id = ?"),
    entries: db.prepare(
      `SELECT entry_id, kind, amount, balance_after, reserved_change, reserved_after, job_id, model, key_id, prompt_tokens, candidates_tokens,
         reason, note, at
       FROM ledger_entries
       WHERE account_id = @account_id AND (@before IS NULL OR entry_id < @before)
         AND (@from IS NULL OR at >= @from) AND (@to IS NULL OR at < @to)
       ORDER BY entry_id DESC LIMIT @limit`,
    ),
    // Open holds of the account whose id starts with a prefix (substr, not LIKE: exact and case-sensitive),
    // less those starting with another; the (account_id, state) index finds the account's open holds.
    openHolds: db
      .prepare(
        `SELECT COUNT(*) FROM holds WHERE account_id = @account AND state = 'held'
           AND substr(reservation_id, 1, length(@counted)) = @counted
           AND (@except IS NULL OR substr(reservation_id, 1, length(@except)) <> @except)`,
      )
      .pluck(),
    insertShortfall: db.prepare(
      "INSERT INTO ledger_shortfalls (reservation_id, account_id, asked, charged, shortfall, at) VALUES (?, ?, ?, ?, ?, ?)",
    ),
    shortfalls: db.prepare("SELECT reservation_id, shortfall FROM ledger_shortfalls WHERE account_id = ? ORDER BY at, reservation_id"),
    shortfallOf: db.prepare("SELECT shortfall FROM ledger_shortfalls WHERE reservation_id = ?").pluck(),
    keySpending: db.prepare("SELECT spending FROM key_spending WHERE key_id = ?").pluck(),
    setKeySpending: db.prepare(
      "INSERT INTO key_spending (key_id, account_id, spending) VALUES (?, ?, ?) ON CONFLICT (key_id) DO UPDATE SET spending = excluded.spending",
    ),
    keyHolds: db.prepare("SELECT amount, job_id FROM holds WHERE key_id = ? AND account_id = ? AND state = 'held'"),
    tally: db
      .prepare("SELECT open FROM open_hold_tallies WHERE account_id = ? AND counted_prefix = ? AND except_prefix = ?")
      .pluck(),
    insertTally: db.prepare("INSERT INTO open_hold_tallies (account_id, counted_prefix, except_prefix, open) VALUES (?, ?, ?, ?)"),
    tallies: db.prepare("SELECT counted_prefix, except_prefix FROM open_hold_tallies WHERE account_id = ?"),
    moveTally: db.prepare(
      "UPDATE open_hold_tallies SET open = open + ? WHERE account_id = ? AND counted_prefix = ? AND except_prefix = ?",
    ),
    keyTally: db.prepare("SELECT held, open_jobs FROM key_hold_tallies WHERE key_id = ?"),
    setKeyTally: db.prepare(
      `INSERT INTO key_hold_tallies (key_id, account_id, held, open_jobs) VALUES (?, ?, ?, ?)
       ON CONFLICT (key_id) DO UPDATE SET held = excluded.held, open_jobs = excluded.open_jobs`,
    ),
  };
}

type LedgerStatements = ReturnType<typeof ledgerStatements>;

/** What the transactions share: key spending, open-hold tallies, and the entries they record. */
function ledgerTallies(s: LedgerStatements) {
  const spendingOf = (keyId: string): KeySpending => {
    const text = s.keySpending.get(keyId) as string | undefined;
    return text === undefined ? NO_SPENDING : decodeKeySpending(text);
  };
  /** The key's open holds, counted row by row (the key's usage report, and a tally's first value). */
  const keyHolds = (accountId: string, keyId: string): KeyHolds => {
    let held = 0n;
    let openJobs = 0;
    for (const row of s.keyHolds.all(keyId, accountId) as { amount: string; job_id: string | null }[]) {
      held += money(row.amount);
      if (row.job_id !== null) openJobs++;
    }
    return { held, openJobs };
  };

  /** The key's open holds from its tally, which the first call creates (inside the reservation's transaction). */
  const tallyOfKey = (accountId: string, keyId: string): KeyHolds => {
    const row = s.keyTally.get(keyId) as { held: string; open_jobs: number } | undefined;
    if (row) return { held: money(row.held), openJobs: row.open_jobs };
    const counted = keyHolds(accountId, keyId);
    s.setKeyTally.run(keyId, accountId, text(counted.held), counted.openJobs);
    return counted;
  };

  /** The account's open holds a maxOpenHolds option counts, from its tally, which the first call creates. */
  const openHoldsOf = (accountId: string, counted: string, except: string | undefined): number => {
    const open = s.tally.get(accountId, counted, except ?? "") as number | undefined;
    if (open !== undefined) return open;
    const now = s.openHolds.get({ account: accountId, counted, except: except ?? null }) as number;
    s.insertTally.run(accountId, counted, except ?? "", now);
    return now;
  };

  /** A hold was taken (+1) or ended (−1): every tally that counts it moves, in the same transaction. */
  const moveTallies = (
    accountId: string, reservationId: string, direction: 1 | -1, amount: Money, keyId: string | null, isJob: boolean,
  ) => {
    for (const t of s.tallies.all(accountId) as { counted_prefix: string; except_prefix: string }[]) {
      if (countsAsOpenHold(reservationId, t.counted_prefix, t.except_prefix === "" ? undefined : t.except_prefix)) {
        s.moveTally.run(direction, accountId, t.counted_prefix, t.except_prefix);
      }
    }
    if (keyId === null) return;
    const row = s.keyTally.get(keyId) as { held: string; open_jobs: number } | undefined;
    if (!row) return;
    s.setKeyTally.run(keyId, accountId, text(money(row.held) + BigInt(direction) * amount), row.open_jobs + (isJob ? direction : 0));
  };

  /** Records a movement in the transaction that makes it. */
  const record = (
    accountId: string, kind: LedgerEntryType, moved: { amount: Money; reservedChange: Money; balance: Money; reserved: Money },
    at: number, reservationId: string | null = null, memo?: HoldMemo | HoldRow, tokens?: SettledTokens, reason?: ReleaseReason, note?: string,
  ): number => {
    const fromRow = memo !== undefined && "state" in memo;
    return Number(s.entry.run({
      account_id: accountId, kind, amount: text(moved.amount), balance_after: text(moved.balance),
      reserved_change: text(moved.reservedChange), reserved_after: text(moved.reserved), reservation_id: reservationId,
      job_id: (fromRow ? memo.job_id : memo?.jobId) ?? null,
      model: (fromRow ? memo.model : memo?.model) ?? null,
      key_id: (fromRow ? memo.key_id : memo?.keyId) ?? null,
      prompt_tokens: tokens?.promptTokens ?? null, candidates_tokens: tokens?.candidatesTokens ?? null, reason: reason ?? null,
      note: note ?? null, at,
    }).lastInsertRowid);
  };

  /**
   * The low-balance alert (decision 0038), judged in the movement's transaction on the account as it was read there
   * (its threshold and state) and its money after the movement: a crossing writes one alert into the outbox.
   */
  const judgeLowBalance = (accountId: string, row: AccountRow, after: BalanceSnapshot, at: number) => {
    const threshold = row.low_balance_threshold === null ? undefined : money(row.low_balance_threshold);
    const available = after.balance - after.reserved;
    const transition = lowBalanceTransition(available, threshold, row.low_balance === 1);
    if (transition === undefined) return;
    s.setLowBalance.run(transition === "crossed" ? 1 : 0, accountId);
    if (transition === "crossed") s.insertAlert.run(`bal_${randomUUID().replaceAll("-", "")}`, accountId, text(available), text(threshold!), at);
  };

  return { spendingOf, keyHolds, tallyOfKey, openHoldsOf, moveTallies, record, judgeLowBalance };
}

/** The ledger's transactions over its statements. */
function ledgerOperations(db: SqliteDb, now: () => number, audit: SqliteAuditLog) {
  const s = ledgerStatements(db);
  const { spendingOf, keyHolds, tallyOfKey, openHoldsOf, moveTallies, record, judgeLowBalance } = ledgerTallies(s);

  const createTx = db.transaction((accountId: string, name: string, initialBalance: Money) => {
    if (s.account.get(accountId)) throw new Error(`account ${accountId} exists`);
    const at = now();
    s.insertAccount.run(accountId, name, text(initialBalance), at, accountNameKey(name));
    if (initialBalance > 0n) record(accountId, "credit", { amount: initialBalance, reservedChange: 0n, balance: initialBalance, reserved: 0n }, at);
  });

  /** The entry a named operation made on the account already (decision 0039): its repeat moves nothing. */
  const madeBy = (accountId: string, operationId: string | undefined): LedgerEntry | undefined => {
    const row = operationId === undefined ? undefined : (s.entryOfOperation.get(accountId, operationId) as EntryRow | undefined);
    return row && toEntry(row);
  };

  const creditTx = db.transaction((accountId: string, amount: Money, auditRecord?: AuditRecord, operationId?: string): Credited | undefined => {
    const account = s.account.get(accountId) as AccountRow | undefined;
    if (!account) return undefined;
    const made = madeBy(accountId, operationId);
    if (made) return { balance: made.balanceAfter, reserved: made.reservedAfter, repeated: true };
    const balance = money(account.balance) + amount;
    s.setBalance.run(text(balance), accountId);
    const at = now();
    const seq = record(accountId, "credit", { amount, reservedChange: 0n, balance, reserved: money(account.reserved) }, at);
    if (operationId !== undefined) s.nameEntry.run(operationId, seq);
    audit.append(auditRecord);
    judgeLowBalance(accountId, account, { balance, reserved: money(account.reserved) }, at);
    return { balance, reserved: money(account.reserved) };
  });

  /** An operator's adjustment (decision 0037): a debit never takes more than the available balance. */
  const adjustTx = db.transaction((accountId: string, amount: Money, reason: string, auditRecord?: AuditRecord, operationId?: string): AdjustOutcome => {
    const account = s.account.get(accountId) as AccountRow | undefined;
    if (!account) return "unknown_account";
    const made = madeBy(accountId, operationId);
    if (made) return { snapshot: { balance: made.balanceAfter, reserved: made.reservedAfter }, entry: made, repeated: true };
    const reserved = money(account.reserved);
    if (amount < 0n && money(account.balance) - reserved < -amount) return "insufficient_funds";
    const balance = money(account.balance) + amount;
    const at = now();
    s.setBalance.run(text(balance), accountId);
    const seq = record(accountId, "adjustment", { amount, reservedChange: 0n, balance, reserved }, at, null, undefined, undefined, undefined, reason);
    if (operationId !== undefined) s.nameEntry.run(operationId, seq);
    audit.append(auditRecord);
    judgeLowBalance(accountId, account, { balance, reserved }, at);
    const entry: LedgerEntry = {
      seq: BigInt(seq), type: "adjustment", amount, balanceAfter: balance, reservedChange: 0n, reservedAfter: reserved, note: reason, at: new Date(at),
    };
    return { snapshot: { balance, reserved }, entry };
  });

  const reserveTx = db.transaction((accountId: string, reservationId: string, amount: Money, options?: ReserveOptions): ReserveOutcome => {
    const account = s.account.get(accountId) as AccountRow | undefined;
    if (!account) return "unknown_account";
    if (s.hold.get(reservationId)) return "reserved"; // the same reservation again moves nothing
    const cap = options?.maxOpenHolds;
    if (cap && openHoldsOf(accountId, cap.countedPrefix, cap.exceptPrefix) >= cap.limit) return "too_many_open_holds";
    const balance = money(account.balance);
    const reserved = money(account.reserved);
    if (balance - reserved < amount) return "insufficient_funds";
    const at = now();
    const key = options?.key;
    if (key) {
      const holds = admissionNeedsHolds(key.limits) ? tallyOfKey(accountId, key.keyId) : NO_HOLDS;
      const refusal = keyAdmission(key.limits, spendingOf(key.keyId), holds, amount, key.isJob, new Date(at));
      if (refusal) return { key: refusal };
      if (key.limits.ratePerMinute !== undefined) s.setKeySpending.run(key.keyId, accountId, encodeKeySpending(countReservation(spendingOf(key.keyId), new Date(at))));
    }
    const memo = options?.memo;
    s.setReserved.run(text(reserved + amount), accountId);
    s.insertHold.run(reservationId, accountId, text(amount), at, memo?.jobId ?? null, memo?.model ?? null, memo?.keyId ?? null);
    moveTallies(accountId, reservationId, 1, amount, memo?.keyId ?? null, memo?.jobId !== undefined);
    record(accountId, "hold", { amount: 0n, reservedChange: amount, balance, reserved: reserved + amount }, at, reservationId, memo);
    judgeLowBalance(accountId, account, { balance, reserved: reserved + amount }, at);
    return "reserved";
  });

  const endTx = db.transaction((
    reservationId: string, state: "settled" | "released", asked: Money, tokens?: SettledTokens, reason?: ReleaseReason,
  ): Settlement | undefined => {
    const hold = s.hold.get(reservationId) as HoldRow | undefined;
    if (!hold) return undefined;
    if (hold.state !== "held") {
      // A repeated settle moves nothing and answers the settlement the hold recorded.
      if (state !== "settled" || hold.state !== "settled" || hold.charged === null) return undefined;
      const shortfall = s.shortfallOf.get(reservationId) as string | undefined;
      return { charged: money(hold.charged), shortfall: shortfall === undefined ? 0n : money(shortfall), repeated: true };
    }
    const account = s.account.get(hold.account_id) as AccountRow;
    const { charged, shortfall } = boundedCharge(asked, money(hold.amount), { balance: money(account.balance), reserved: money(account.reserved) });
    const balance = money(account.balance) - charged;
    const reserved = money(account.reserved) - money(hold.amount);
    const at = now();
    s.setBoth.run(text(balance), text(reserved), hold.account_id);
    s.endHold.run(state, state === "settled" ? text(charged) : null, at, reservationId);
    moveTallies(hold.account_id, reservationId, -1, money(hold.amount), hold.key_id, hold.job_id !== null);
    const moved = { amount: -charged, reservedChange: -money(hold.amount), balance, reserved };
    if (state === "settled") record(hold.account_id, "charge", moved, at, reservationId, hold, tokens);
    else record(hold.account_id, "release", { ...moved, amount: 0n }, at, reservationId, hold, undefined, reason);
    if (state === "settled" && hold.key_id !== null) {
      s.setKeySpending.run(hold.key_id, hold.account_id, encodeKeySpending(countCharge(spendingOf(hold.key_id), charged, new Date(at))));
    }
    if (shortfall > 0n) s.insertShortfall.run(reservationId, hold.account_id, text(asked), text(charged), text(shortfall), at);
    judgeLowBalance(hold.account_id, account, { balance, reserved }, at);
    return { charged, shortfall };
  });

  return { s, createTx, creditTx, adjustTx, reserveTx, endTx, spendingOf, keyHolds };
}

/**
 * Accounts and their money on SQLite. Each step is one IMMEDIATE transaction
 * (better-sqlite3 runs it synchronously, so nothing else on the event loop
 * interleaves): a reservation is checked against the available balance (and
 * the account's open-hold limit) and recorded as a hold in the same
 * transaction that raises `reserved`; settling or releasing moves a hold out
 * of 'held' once, a settlement charging at most hold + available and
 * recording the rest in ledger_shortfalls. Holds and ledger entries are
 * kept for good, so every balance can be explained row by row.
 */
export class SqliteLedger implements Ledger, BalanceAlertOutbox {
  private readonly ops: ReturnType<typeof ledgerOperations>;
  private readonly listing: ReturnType<typeof sqliteAccountList>;
  private readonly settings: ReturnType<typeof sqliteAccountSettings>;

  /** `audit`: a credit's audit record is written in the credit's own IMMEDIATE transaction. */
  constructor(db: SqliteDb, now: () => number = Date.now, audit = new SqliteAuditLog(db)) {
    this.ops = ledgerOperations(db, now, audit);
    this.listing = sqliteAccountList(db);
    this.settings = sqliteAccountSettings(db);
  }

  async account(accountId: string): Promise<AccountDetails | undefined> {
    return sqliteCall(() => this.settings.account(accountId));
  }

  async updateAccount(accountId: string, change: AccountChange): Promise<AccountDetails | undefined> {
    return sqliteCall(() => this.settings.update.immediate(accountId, change));
  }

  async pendingBalanceAlerts(limit: number): Promise<BalanceAlert[]> {
    return sqliteCall(() => this.settings.pendingAlerts(limit));
  }

  async removeBalanceAlert(alertId: string): Promise<void> {
    sqliteCall(() => this.settings.removeAlert(alertId));
  }

  async listAccounts(query: AccountListQuery): Promise<AccountListPage> {
    return this.listing(query);
  }

  async createAccount(accountId: string, name: string, initialBalance: Money): Promise<void> {
    sqliteCall(() => this.ops.createTx.immediate(accountId, name, initialBalance));
  }

  async credit(accountId: string, amount: Money, audit?: AuditRecord, operationId?: string): Promise<Credited | undefined> {
    return sqliteCall(() => this.ops.creditTx.immediate(accountId, amount, audit, operationId));
  }

  async adjust(accountId: string, amount: Money, reason: string, audit?: AuditRecord, operationId?: string): Promise<AdjustOutcome> {
    return sqliteCall(() => this.ops.adjustTx.immediate(accountId, amount, reason, audit, operationId));
  }

  async balance(accountId: string): Promise<BalanceSnapshot | undefined> {
    const row = sqliteCall(() => this.ops.s.account.get(accountId)) as AccountRow | undefined;
    return row && { balance: money(row.balance), reserved: money(row.reserved) };
  }

  async reserve(accountId: string, reservationId: string, amount: Money, options?: ReserveOptions): Promise<ReserveOutcome> {
    return sqliteCall(() => this.ops.reserveTx.immediate(accountId, reservationId, amount, options));
  }

  /** reserve's transaction, synchronous: inside a caller's transaction on the same database it runs as a savepoint of it (SqliteIntentHolds). */
  reserveNow(accountId: string, reservationId: string, amount: Money, options?: ReserveOptions): ReserveOutcome {
    return this.ops.reserveTx(accountId, reservationId, amount, options);
  }

  /** settle's (or release's, for `reason`) transaction, synchronous: a savepoint of a caller's transaction on the same database (SqliteIntentHolds). */
  endNow(reservationId: string, state: "settled" | "released", amount: Money, tokens?: SettledTokens, reason?: ReleaseReason): Settlement | undefined {
    return this.ops.endTx(reservationId, state, amount, tokens, reason);
  }

  /** The hold names its account; `accountId` is not needed to find it. A repeat answers the hold's recorded charge. */
  async settle(_accountId: string, reservationId: string, amount: Money, tokens?: SettledTokens): Promise<Settlement | undefined> {
    return sqliteCall(() => this.ops.endTx.immediate(reservationId, "settled", amount, tokens));
  }

  async release(_accountId: string, reservationId: string, reason?: ReleaseReason): Promise<void> {
    sqliteCall(() => this.ops.endTx.immediate(reservationId, "released", 0n, undefined, reason));
  }

  async shortfalls(accountId: string): Promise<Shortfall[]> {
    const rows = sqliteCall(() => this.ops.s.shortfalls.all(accountId)) as { reservation_id: string; shortfall: string }[];
    return rows.map((row) => ({ reservationId: row.reservation_id, amount: money(row.shortfall) }));
  }

  async hasAnyAccount(): Promise<boolean> {
    return sqliteCall(() => this.ops.s.anyAccount.get()) !== undefined;
  }

  async keyAccount(accountId: string, keyId: string): Promise<KeyAccount> {
    return sqliteCall(() => ({ spending: this.ops.spendingOf(keyId), ...this.ops.keyHolds(accountId, keyId) }));
  }

  async entries(query: LedgerEntryQuery): Promise<LedgerEntryPage> {
    const rows = sqliteCall(() =>
      this.ops.s.entries.all({
        account_id: query.accountId,
        before: query.before === undefined ? null : Number(query.before.seq),
        from: query.from?.getTime() ?? null,
        to: query.to?.getTime() ?? null,
        limit: query.limit + 1,
      }),
    ) as EntryRow[];
    const entries = rows.slice(0, query.limit).map(toEntry);
    return { entries, next: rows.length > query.limit ? entries.at(-1) : undefined };
  }
}
