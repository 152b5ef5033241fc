import type { Money } from "../../domain/money.js";
import { boundedCharge } from "../../domain/pricing/settlement.js";
import type { BalanceSnapshot, Ledger, ReserveOptions, ReserveOutcome, Settlement, Shortfall } from "../../ports/ledger.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";

interface AccountRow {
  balance: string;
  reserved: string;
}

interface HoldRow {
  account_id: string;
  amount: string;
  state: "held" | "settled" | "released";
  /** What the settlement charged (set when settled). */
  charged: string | null;
}

/** Money columns are TEXT decimal strings of picodollars: exact at any size. */
const text = (amount: Money): string => amount.toString();
const money = (value: string): Money => BigInt(value);

/** Prepared statements and transactions of the ledger (tables of migrations/0001_initial.sql and 0002_ledger_shortfalls.sql). */
function ledgerOperations(db: SqliteDb, now: () => number) {
  const s = {
    account: db.prepare("SELECT balance, reserved FROM accounts WHERE account_id = ?"),
    anyAccount: db.prepare("SELECT 1 FROM accounts LIMIT 1").pluck(),
    insertAccount: db.prepare("INSERT INTO accounts (account_id, name, balance, reserved, created_at) VALUES (?, ?, ?, '0', ?)"),
    setBalance: db.prepare("UPDATE accounts SET balance = ? WHERE account_id = ?"),
    setReserved: db.prepare("UPDATE accounts SET reserved = ? WHERE account_id = ?"),
    setBoth: db.prepare("UPDATE accounts SET balance = ?, reserved = ? WHERE account_id = ?"),
    hold: db.prepare("SELECT account_id, amount, state, charged FROM holds WHERE reservation_id = ?"),
    insertHold: db.prepare(
      "INSERT INTO holds (reservation_id, account_id, amount, state, created_at) VALUES (?, ?, ?, 'held', ?)",
    ),
    endHold: db.prepare(
      "UPDATE holds SET state = ?, charged = ?, ended_at = ? WHERE reservation_id = ? AND state = 'held'",
    ),
    entry: db.prepare(
      "INSERT INTO ledger_entries (account_id, kind, amount, balance_after, reservation_id, at) VALUES (?, ?, ?, ?, ?, ?)",
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
  };

  const createTx = db.transaction((accountId: string, name: string, initialBalance: Money) => {
    if (s.account.get(accountId)) throw new Error(`account ${accountId} exists`);
    const at = now();
    s.insertAccount.run(accountId, name, text(initialBalance), at);
    s.entry.run(accountId, "opening", text(initialBalance), text(initialBalance), null, at);
  });

  const creditTx = db.transaction((accountId: string, amount: Money): BalanceSnapshot | undefined => {
    const account = s.account.get(accountId) as AccountRow | undefined;
    if (!account) return undefined;
    const balance = money(account.balance) + amount;
    s.setBalance.run(text(balance), accountId);
    s.entry.run(accountId, "credit", text(amount), text(balance), null, now());
    return { balance, reserved: money(account.reserved) };
  });

  const reserveTx = db.transaction((accountId: string, reservationId: string, amount: Money, options?: ReserveOptions): ReserveOutcome => {
    const account = s.account.get(accountId) as AccountRow | undefined;
    if (!account) return "unknown_account";
    if (s.hold.get(reservationId)) return "reserved"; // the same reservation again moves nothing
    const cap = options?.maxOpenHolds;
    if (cap) {
      const open = s.openHolds.get({ account: accountId, counted: cap.countedPrefix, except: cap.exceptPrefix ?? null }) as number;
      if (open >= cap.limit) return "too_many_open_holds";
    }
    const balance = money(account.balance);
    const reserved = money(account.reserved);
    if (balance - reserved < amount) return "insufficient_funds";
    s.setReserved.run(text(reserved + amount), accountId);
    s.insertHold.run(reservationId, accountId, text(amount), now());
    return "reserved";
  });

  const endTx = db.transaction((reservationId: string, state: "settled" | "released", asked: Money): Settlement | undefined => {
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
    if (state === "settled") s.entry.run(hold.account_id, "charge", text(charged), text(balance), reservationId, at);
    if (shortfall > 0n) s.insertShortfall.run(reservationId, hold.account_id, text(asked), text(charged), text(shortfall), at);
    return { charged, shortfall };
  });

  return { s, createTx, creditTx, reserveTx, endTx };
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
export class SqliteLedger implements Ledger {
  private readonly ops: ReturnType<typeof ledgerOperations>;

  constructor(db: SqliteDb, now: () => number = Date.now) {
    this.ops = ledgerOperations(db, now);
  }

  async createAccount(accountId: string, name: string, initialBalance: Money): Promise<void> {
    sqliteCall(() => this.ops.createTx.immediate(accountId, name, initialBalance));
  }

  async credit(accountId: string, amount: Money): Promise<BalanceSnapshot | undefined> {
    return sqliteCall(() => this.ops.creditTx.immediate(accountId, amount));
  }

  async balance(accountId: string): Promise<BalanceSnapshot | undefined> {
    const row = sqliteCall(() => this.ops.s.account.get(accountId)) as AccountRow | undefined;
    return row && { balance: money(row.balance), reserved: money(row.reserved) };
  }

  async reserve(accountId: string, reservationId: string, amount: Money, options?: ReserveOptions): Promise<ReserveOutcome> {
    return sqliteCall(() => this.ops.reserveTx.immediate(accountId, reservationId, amount, options));
  }

  /** The hold names its account; `accountId` is not needed to find it. A repeat answers the hold's recorded charge. */
  async settle(_accountId: string, reservationId: string, amount: Money): Promise<Settlement | undefined> {
    return sqliteCall(() => this.ops.endTx.immediate(reservationId, "settled", amount));
  }

  async release(_accountId: string, reservationId: string): Promise<void> {
    sqliteCall(() => this.ops.endTx.immediate(reservationId, "released", 0n));
  }

  async shortfalls(accountId: string): Promise<Shortfall[]> {
    const rows = sqliteCall(() => this.ops.s.shortfalls.all(accountId)) as { reservation_id: string; shortfall: string }[];
    return rows.map((row) => ({ reservationId: row.reservation_id, amount: money(row.shortfall) }));
  }

  async hasAnyAccount(): Promise<boolean> {
    return sqliteCall(() => this.ops.s.anyAccount.get()) !== undefined;
  }
}
