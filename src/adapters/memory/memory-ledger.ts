import type { Money } from "../../domain/money.js";
import type { BalanceSnapshot, Ledger, ReserveOutcome } from "../../ports/ledger.js";

interface Account {
  name: string;
  balance: Money;
  reserved: Money;
}

interface Reservation {
  accountId: string;
  amount: Money;
  state: "held" | "settled" | "released";
}

/**
 * Each method checks and changes state without awaiting in between, so on
 * one event loop every operation is atomic: concurrent reservations can never
 * overdraw an account.
 */
export class MemoryLedger implements Ledger {
  private readonly accounts = new Map<string, Account>();
  private readonly reservations = new Map<string, Reservation>();

  async createAccount(accountId: string, name: string, initialBalance: Money): Promise<void> {
    if (this.accounts.has(accountId)) throw new Error(`account ${accountId} exists`);
    this.accounts.set(accountId, { name, balance: initialBalance, reserved: 0n });
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

  async reserve(accountId: string, reservationId: string, amount: Money): Promise<ReserveOutcome> {
    const account = this.accounts.get(accountId);
    if (!account) return "unknown_account";
    if (this.reservations.has(reservationId)) return "reserved";
    if (account.balance - account.reserved < amount) return "insufficient_funds";
    account.reserved += amount;
    this.reservations.set(reservationId, { accountId, amount, state: "held" });
    return "reserved";
  }

  async settle(_accountId: string, reservationId: string, amount: Money): Promise<void> {
    this.end(reservationId, "settled", amount);
  }

  async release(_accountId: string, reservationId: string): Promise<void> {
    this.end(reservationId, "released", 0n);
  }

  async hasAnyAccount(): Promise<boolean> {
    return this.accounts.size > 0;
  }

  private end(reservationId: string, state: "settled" | "released", charge: Money): void {
    const reservation = this.reservations.get(reservationId);
    if (!reservation || reservation.state !== "held") return;
    const account = this.accounts.get(reservation.accountId)!;
    account.reserved -= reservation.amount;
    account.balance -= charge;
    reservation.state = state;
  }
}

const snapshot = (account: Account): BalanceSnapshot => ({ balance: account.balance, reserved: account.reserved });
