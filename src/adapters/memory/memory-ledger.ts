import type { Money } from "../../domain/money.js";
import { boundedCharge, countsAsOpenHold } from "../../domain/pricing/settlement.js";
import type { BalanceSnapshot, Ledger, ReserveOptions, ReserveOutcome, Settlement, Shortfall } from "../../ports/ledger.js";

interface Account {
  name: string;
  balance: Money;
  reserved: Money;
  /** Reservation ids of the account's open holds. */
  open: Set<string>;
  shortfalls: Shortfall[];
}

interface Reservation {
  accountId: string;
  amount: Money;
  state: "held" | "settled" | "released";
  /** What the settlement moved, once settled. */
  settlement?: Settlement;
}

/**
 * Each method checks and changes state without awaiting in between, so on
 * one event loop every operation is atomic: concurrent reservations can never
 * overdraw an account or exceed its open-hold limit.
 */
export class MemoryLedger implements Ledger {
  private readonly accounts = new Map<string, Account>();
  private readonly reservations = new Map<string, Reservation>();

  async createAccount(accountId: string, name: string, initialBalance: Money): Promise<void> {
    if (this.accounts.has(accountId)) throw new Error(`account ${accountId} exists`);
    this.accounts.set(accountId, { name, balance: initialBalance, reserved: 0n, open: new Set(), shortfalls: [] });
  }

  async credit(accountId: string, amount: Money): Promise<BalanceSnapshot | undefined> {
    const account = this.accounts.get(accountId);
    if (!account) return undefined;
    account.balance += amount;
    return snapshot(account);
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
    account.reserved += amount;
    account.open.add(reservationId);
    this.reservations.set(reservationId, { accountId, amount, state: "held" });
    return "reserved";
  }

  async settle(_accountId: string, reservationId: string, amount: Money): Promise<Settlement | undefined> {
    return this.end(reservationId, "settled", amount);
  }

  async release(_accountId: string, reservationId: string): Promise<void> {
    this.end(reservationId, "released", 0n);
  }

  async shortfalls(accountId: string): Promise<Shortfall[]> {
    return [...(this.accounts.get(accountId)?.shortfalls ?? [])];
  }

  async hasAnyAccount(): Promise<boolean> {
    return this.accounts.size > 0;
  }

  private end(reservationId: string, state: "settled" | "released", asked: Money): Settlement | undefined {
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
    return settlement;
  }
}

const snapshot = (account: Account): BalanceSnapshot => ({ balance: account.balance, reserved: account.reserved });
