import type { Money } from "../domain/money.js";

export interface BalanceSnapshot {
  readonly balance: Money;
  readonly reserved: Money;
}

export type ReserveOutcome = "reserved" | "insufficient_funds" | "unknown_account";

/**
 * Accounts and their money. Reservations are keyed by id so that every step
 * is idempotent: reserving, settling or releasing the same id twice moves
 * money once.
 */
export interface Ledger {
  createAccount(accountId: string, name: string, initialBalance: Money): Promise<void>;
  credit(accountId: string, amount: Money): Promise<BalanceSnapshot | undefined>;
  balance(accountId: string): Promise<BalanceSnapshot | undefined>;
  reserve(accountId: string, reservationId: string, amount: Money): Promise<ReserveOutcome>;
  /** Charges `amount` and ends the hold. A no-op when the reservation is already settled or released. */
  settle(accountId: string, reservationId: string, amount: Money): Promise<void>;
  /** Ends the hold without charging. A no-op when already settled or released. */
  release(accountId: string, reservationId: string): Promise<void>;
  /** Whether any account exists (for the first-start hint). */
  hasAnyAccount(): Promise<boolean>;
}
