import type { Money } from "../../domain/money.js";
import type { AuditRecord } from "../../ports/audit-log.js";
import { MemoryAuditLog } from "./memory-audit-log.js";
import type { ReleaseReason } from "../../domain/ledger/release-reasons.js";
import { boundedCharge, countsAsOpenHold } from "../../domain/pricing/settlement.js";
import { countCharge, countReservation, keyAdmission, NO_SPENDING, type KeySpending } from "../../domain/accounts/key-limits.js";
import { randomUUID } from "node:crypto";
import { accountNameKey } from "../../domain/accounts/account-listing.js";
import { isLowBalance, lowBalanceTransition } from "../../domain/accounts/low-balance.js";
import type {
  AccountChange, AccountDetails, AccountListPage, AccountListQuery, AdjustOutcome, BalanceSnapshot, Credited, HoldMemo, KeyAccount, Ledger, LedgerEntry, LedgerEntryPage, LedgerEntryQuery, ReserveOptions, ReserveOutcome, SettledTokens, Settlement, Shortfall,
} from "../../ports/ledger.js";
import type { BalanceAlert, BalanceAlertOutbox } from "../../ports/balance-alerts.js";

interface Account {
  name: string;
  createdAt: Date;
  balance: Money;
  reserved: Money;
  /** Reservation ids of the account's open holds. */
  open: Set<string>;
  shortfalls: Shortfall[];
  /** Every movement, oldest first (seq = index + 1). */
  entries: LedgerEntry[];
  /** Per key of the account: what it spent and its reservations this minute. */
  keys: Map<string, KeySpending>;
  lowBalanceThreshold?: Money;
  lowBalance: boolean;
  /** Entries made by named operations (credits and adjustments with an operation id), by that id. */
  once: Map<string, LedgerEntry>;
}

interface Reservation {
  accountId: string;
  amount: Money;
  state: "held" | "settled" | "released";
  /** What the settlement moved, once settled. */
  settlement?: Settlement;
  memo?: HoldMemo;
}

/**
 * Each method checks and changes state without awaiting in between, so on
 * one event loop every operation is atomic: concurrent reservations can never
 * overdraw an account or exceed its open-hold limit.
 */
export class MemoryLedger implements Ledger, BalanceAlertOutbox {
  private readonly accounts = new Map<string, Account>();
  private readonly reservations = new Map<string, Reservation>();
  private readonly alerts: BalanceAlert[] = [];

  /** Judges the low-balance alert after a movement, in the same synchronous step (decision 0038). */
  private judge(accountId: string, account: Account): void {
    const available = account.balance - account.reserved;
    const transition = lowBalanceTransition(available, account.lowBalanceThreshold, account.lowBalance);
    if (transition === undefined) return;
    account.lowBalance = transition === "crossed";
    if (transition === "crossed") {
      this.alerts.push({ alertId: `bal_${randomUUID().replaceAll("-", "")}`, accountId, available, threshold: account.lowBalanceThreshold!, at: new Date() });
    }
  }

  /** `audit`: where a credit's audit record goes, in the credit's own synchronous step. */
  constructor(private readonly audit = new MemoryAuditLog()) {}

  async createAccount(accountId: string, name: string, initialBalance: Money): Promise<void> {
    if (this.accounts.has(accountId)) throw new Error(`account ${accountId} exists`);
    const account: Account = { name, createdAt: new Date(), balance: initialBalance, reserved: 0n, open: new Set(), shortfalls: [], entries: [], keys: new Map(), lowBalance: false, once: new Map() };
    this.accounts.set(accountId, account);
    if (initialBalance > 0n) record(account, { type: "credit", amount: initialBalance, reservedChange: 0n });
  }

  async credit(accountId: string, amount: Money, audit?: AuditRecord, operationId?: string): Promise<Credited | undefined> {
    const account = this.accounts.get(accountId);
    if (!account) return undefined;
    const made = operationId === undefined ? undefined : account.once.get(operationId);
    if (made) return { balance: made.balanceAfter, reserved: made.reservedAfter, repeated: true };
    account.balance += amount;
    record(account, { type: "credit", amount, reservedChange: 0n });
    if (operationId !== undefined) account.once.set(operationId, account.entries.at(-1)!);
    this.audit.append(audit);
    this.judge(accountId, account);
    return snapshot(account);
  }

  async adjust(accountId: string, amount: Money, reason: string, audit?: AuditRecord, operationId?: string): Promise<AdjustOutcome> {
    const account = this.accounts.get(accountId);
    if (!account) return "unknown_account";
    const made = operationId === undefined ? undefined : account.once.get(operationId);
    if (made) return { snapshot: { balance: made.balanceAfter, reserved: made.reservedAfter }, entry: made, repeated: true };
    if (amount < 0n && account.balance - account.reserved < -amount) return "insufficient_funds";
    account.balance += amount;
    record(account, { type: "adjustment", amount, reservedChange: 0n, note: reason });
    if (operationId !== undefined) account.once.set(operationId, account.entries.at(-1)!);
    this.audit.append(audit);
    this.judge(accountId, account);
    return { snapshot: snapshot(account), entry: account.entries.at(-1)! };
  }

  async balance(accountId: string): Promise<BalanceSnapshot | undefined> {
    const account = this.accounts.get(accountId);
    return account && snapshot(account);
  }

  async reserve(accountId: string, reservationId: string, amount: Money, options?: ReserveOptions): Promise<ReserveOutcome> {
    const account = this.accounts.get(accountId);
    if (!account) return "unknown_account";
    if (this.reservations.has(reservationId)) return "reserved";
    const cap = options?.maxOpenHolds;
    if (cap) {
      let open = 0;
      for (const id of account.open) if (countsAsOpenHold(id, cap.countedPrefix, cap.exceptPrefix)) open++;
      if (open >= cap.limit) return "too_many_open_holds";
    }
    if (account.balance - account.reserved < amount) return "insufficient_funds";
    const key = options?.key;
    const now = new Date();
    if (key) {
      const refusal = keyAdmission(key.limits, account.keys.get(key.keyId) ?? NO_SPENDING, this.keyHolds(account, key.keyId), amount, key.isJob, now);
      if (refusal) return { key: refusal };
      if (key.limits.ratePerMinute !== undefined) account.keys.set(key.keyId, countReservation(account.keys.get(key.keyId) ?? NO_SPENDING, now));
    }
    account.reserved += amount;
    account.open.add(reservationId);
    this.reservations.set(reservationId, { accountId, amount, state: "held", memo: options?.memo });
    record(account, { type: "hold", amount: 0n, reservedChange: amount, memo: options?.memo });
    this.judge(accountId, account);
    return "reserved";
  }

  async settle(_accountId: string, reservationId: string, amount: Money, tokens?: SettledTokens): Promise<Settlement | undefined> {
    return this.end(reservationId, "settled", amount, tokens);
  }

  async release(_accountId: string, reservationId: string, reason?: ReleaseReason): Promise<void> {
    this.end(reservationId, "released", 0n, undefined, reason);
  }

  async shortfalls(accountId: string): Promise<Shortfall[]> {
    return [...(this.accounts.get(accountId)?.shortfalls ?? [])];
  }

  async account(accountId: string): Promise<AccountDetails | undefined> {
    const account = this.accounts.get(accountId);
    if (!account) return undefined;
    return {
      accountId, name: account.name, balance: account.balance, reserved: account.reserved, createdAt: account.createdAt,
      openJobs: [...account.open].filter((id) => this.reservations.get(id)?.memo?.jobId !== undefined).length,
      ...(account.lowBalanceThreshold !== undefined && { lowBalanceThreshold: account.lowBalanceThreshold }), lowBalance: account.lowBalance,
    };
  }

  async updateAccount(accountId: string, change: AccountChange): Promise<AccountDetails | undefined> {
    const account = this.accounts.get(accountId);
    if (!account) return undefined;
    if (change.name !== undefined) account.name = change.name;
    if (change.lowBalanceThreshold !== undefined) {
      account.lowBalanceThreshold = change.lowBalanceThreshold ?? undefined;
      account.lowBalance = isLowBalance(account.balance - account.reserved, account.lowBalanceThreshold);
    }
    return this.account(accountId);
  }

  /** The balance.low events due and not yet handed over (the outbox, ports/balance-alerts.ts), oldest first. */
  async pendingBalanceAlerts(limit: number): Promise<BalanceAlert[]> {
    return this.alerts.slice(0, limit);
  }

  async removeBalanceAlert(alertId: string): Promise<void> {
    const at = this.alerts.findIndex((alert) => alert.alertId === alertId);
    if (at >= 0) this.alerts.splice(at, 1);
  }

  async hasAnyAccount(): Promise<boolean> {
    return this.accounts.size > 0;
  }

  async listAccounts(query: AccountListQuery): Promise<AccountListPage> {
    const keyOf = (id: string, account: Account) => (query.by === "name" ? accountNameKey(account.name) : id);
    const after = query.after;
    const matching = [...this.accounts]
      .map(([accountId, account]) => ({ accountId, account, key: keyOf(accountId, account) }))
      .filter(({ key, accountId }) => key.startsWith(query.prefix) && (!after || key > after.key || (key === after.key && accountId > after.accountId)))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.accountId < b.accountId ? -1 : a.accountId > b.accountId ? 1 : 0));
    const page = matching.slice(0, query.limit);
    const last = page.at(-1);
    return {
      accounts: page.map(({ accountId, account }) => ({
        accountId, name: account.name, balance: account.balance, reserved: account.reserved, createdAt: account.createdAt,
        openJobs: [...account.open].filter((id) => this.reservations.get(id)?.memo?.jobId !== undefined).length,
      })),
      ...(matching.length > query.limit && last ? { next: { key: last.key, accountId: last.accountId } } : {}),
    };
  }

  async keyAccount(accountId: string, keyId: string): Promise<KeyAccount> {
    const account = this.accounts.get(accountId);
    if (!account) return { spending: NO_SPENDING, held: 0n, openJobs: 0 };
    return { spending: account.keys.get(keyId) ?? NO_SPENDING, ...this.keyHolds(account, keyId) };
  }

  private keyHolds(account: Account, keyId: string): { held: Money; openJobs: number } {
    let held = 0n;
    let openJobs = 0;
    for (const id of account.open) {
      const reservation = this.reservations.get(id)!;
      if (reservation.memo?.keyId !== keyId) continue;
      held += reservation.amount;
      if (reservation.memo.jobId !== undefined) openJobs++;
    }
    return { held, openJobs };
  }

  async entries(query: LedgerEntryQuery): Promise<LedgerEntryPage> {
    const all = this.accounts.get(query.accountId)?.entries ?? [];
    const matching = all.filter(
      (entry) =>
        (query.before === undefined || entry.seq < query.before.seq) &&
        (query.from === undefined || entry.at >= query.from) &&
        (query.to === undefined || entry.at < query.to),
    );
    const page = matching.reverse().slice(0, query.limit);
    return { entries: page, next: matching.length > query.limit ? page.at(-1) : undefined };
  }

  private end(reservationId: string, state: "settled" | "released", asked: Money, tokens?: SettledTokens, reason?: ReleaseReason): Settlement | undefined {
    const reservation = this.reservations.get(reservationId);
    if (!reservation) return undefined;
    // A repeated settle answers what the settlement recorded; nothing moves again.
    if (reservation.state !== "held") return state === "settled" && reservation.settlement ? { ...reservation.settlement, repeated: true } : undefined;
    const account = this.accounts.get(reservation.accountId)!;
    const settlement = boundedCharge(asked, reservation.amount, account);
    account.reserved -= reservation.amount;
    account.balance -= settlement.charged;
    account.open.delete(reservationId);
    if (settlement.shortfall > 0n) account.shortfalls.push({ reservationId, amount: settlement.shortfall });
    reservation.state = state;
    if (state === "settled") reservation.settlement = settlement;
    const keyId = reservation.memo?.keyId;
    if (state === "settled" && keyId !== undefined) account.keys.set(keyId, countCharge(account.keys.get(keyId) ?? NO_SPENDING, settlement.charged, new Date()));
    record(account, state === "settled"
      ? { type: "charge", amount: -settlement.charged, reservedChange: -reservation.amount, memo: reservation.memo, tokens }
      : { type: "release", amount: 0n, reservedChange: -reservation.amount, memo: reservation.memo, ...(reason !== undefined && { reason }) });
    this.judge(reservation.accountId, account);
    return settlement;
  }
}

/** Appends an entry for a movement already applied to the account. */
function record(account: Account, entry: Pick<LedgerEntry, "type" | "amount" | "reservedChange" | "memo" | "tokens" | "reason" | "note">): void {
  account.entries.push({
    ...entry, seq: BigInt(account.entries.length + 1), balanceAfter: account.balance, reservedAfter: account.reserved, at: new Date(),
  });
}

const snapshot = (account: Account): BalanceSnapshot => ({ balance: account.balance, reserved: account.reserved });
