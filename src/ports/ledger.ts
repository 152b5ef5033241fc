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
  /**
   * Set when this call moved nothing: the hold had already been settled
   * (before a crash, by another worker), and this is the settlement recorded then.
   */
  readonly repeated?: true;
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
   * hold. Repeated on a hold already settled, it moves nothing and answers
   * the settlement recorded then, marked `repeated` (so a repeat after a
   * crash shows what was actually charged, never the amount asked). Undefined
   * (a no-op) when the hold was released, or never taken. Cassandra keeps
   * the capped settlements (those with a shortfall) beyond their hold, not
   * the others: there a repeat answers amount − recorded shortfall, or
   * undefined for a settlement in full (which charged the amount asked), so a
   * repeat must ask the same amount as the first call did.
   */
  settle(accountId: string, reservationId: string, amount: Money): Promise<Settlement | undefined>;
  /** Ends the hold without charging. A no-op when already settled or released. */
  release(accountId: string, reservationId: string): Promise<void>;
  /** The account's recorded shortfalls (for operators and tests). */
  shortfalls(accountId: string): Promise<Shortfall[]>;
  /** Whether any account exists (for the first-start hint). */
  hasAnyAccount(): Promise<boolean>;
}
