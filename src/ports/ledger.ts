import type { Money } from "../domain/money.js";

export interface BalanceSnapshot {
  readonly balance: Money;
  readonly reserved: Money;
}

export type ReserveOutcome = "reserved" | "insufficient_funds" | "unknown_account" | "too_many_open_holds";

export interface ReserveOptions {
  /**
   * Refuse ("too_many_open_holds") when the account already has this many
   * open holds whose reservation id starts with `countedPrefix`, checked in
   * the same atomic step as the balance (MAX_QUEUED_JOBS_PER_ACCOUNT).
   */
  readonly maxOpenHolds?: { readonly limit: number; readonly countedPrefix: string; readonly exceptPrefix?: string };
}

/** What a settlement moved. */
export interface Settlement {
  /** What left the balance: the amount asked, or less when the hold and the available balance could not cover it. */
  readonly charged: Money;
  /** The part of the amount asked that was not charged (the operator's loss, recorded as a shortfall); 0 when covered. */
  readonly shortfall: Money;
}

/** A settlement that asked for more than the balance allowed: kept for the operator, never deleted. */
export interface Shortfall {
  readonly reservationId: string;
  /** The amount asked and not charged. */
  readonly amount: Money;
}

/**
 * Accounts and their money. Reservations are keyed by id so that every step
 * is idempotent: reserving, settling or releasing the same id twice moves
 * money once. A balance never goes below zero: a settlement charges at most
 * the hold plus the available balance, and records the rest as a shortfall.
 */
export interface Ledger {
  createAccount(accountId: string, name: string, initialBalance: Money): Promise<void>;
  credit(accountId: string, amount: Money): Promise<BalanceSnapshot | undefined>;
  balance(accountId: string): Promise<BalanceSnapshot | undefined>;
  reserve(accountId: string, reservationId: string, amount: Money, options?: ReserveOptions): Promise<ReserveOutcome>;
  /**
   * Charges `amount`, or at most the hold plus the available balance (the
   * rest is recorded as a shortfall in the same atomic step), and ends the
   * hold. Undefined (a no-op) when the reservation is already settled or
   * released, so only the call that ended the hold reports its settlement.
   */
  settle(accountId: string, reservationId: string, amount: Money): Promise<Settlement | undefined>;
  /** Ends the hold without charging. A no-op when already settled or released. */
  release(accountId: string, reservationId: string): Promise<void>;
  /** The account's recorded shortfalls (for operators and tests). */
  shortfalls(accountId: string): Promise<Shortfall[]>;
  /** Whether any account exists (for the first-start hint). */
  hasAnyAccount(): Promise<boolean>;
}
