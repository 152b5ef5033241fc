import type { Money } from "../domain/money.js";
import type { KeyLimits, KeyRefusal, KeySpending } from "../domain/accounts/key-limits.js";
import type { ReleaseReason } from "../domain/ledger/release-reasons.js";
import type { AuditRecord } from "./audit-log.js";

export interface BalanceSnapshot {
  readonly balance: Money;
  readonly reserved: Money;
}

export type ReserveOutcome =
  | "reserved" | "insufficient_funds" | "unknown_account" | "too_many_open_holds"
  /** Refused by a limit of the key (domain/accounts/key-limits.ts), checked after the account's own. */
  | { readonly key: KeyRefusal };

/** The key a reservation is made with, and its limits, checked in the same atomic step. */
export interface KeyReservation {
  readonly keyId: string;
  readonly limits: KeyLimits;
  /** A job (counted against max_concurrent_jobs) rather than a synchronous text call. */
  readonly isJob: boolean;
}

/** What the ledger knows of one key: its spending and its open holds. */
export interface KeyAccount {
  readonly spending: KeySpending;
  readonly held: Money;
  readonly openJobs: number;
}

/** What a hold is for: every entry the hold makes carries it (the statement, usage reports). */
export interface HoldMemo {
  /** The job; undefined for a synchronous text call. */
  readonly jobId?: string;
  readonly model: string;
  /** The API key that asked for it. */
  readonly keyId?: string;
}

/** The tokens a settlement paid for (text; zero for images and videos). */
export interface SettledTokens {
  readonly promptTokens: number;
  readonly candidatesTokens: number;
}

export type LedgerEntryType = "credit" | "hold" | "charge" | "release" | "adjustment";

/**
 * One movement of an account's money, written in the same atomic step as
 * the movement and never changed: the sum of `amount` over an account's
 * entries is its balance, the sum of `reservedChange` its reserved amount.
 */
export interface LedgerEntry {
  /** Grows with every entry of the account: the statement's order (and `at` never decreases along it). */
  readonly seq: bigint;
  readonly type: LedgerEntryType;
  /** Signed change of the balance: credits positive, charges negative, holds and releases zero. */
  readonly amount: Money;
  readonly balanceAfter: Money;
  /** Signed change of `reserved`: a hold adds its amount; the charge or release that ends it takes it away. */
  readonly reservedChange: Money;
  readonly reservedAfter: Money;
  /** What the hold was for (holds, charges, releases). */
  readonly memo?: HoldMemo;
  /** On charges: the tokens paid for. */
  readonly tokens?: SettledTokens;
  /** On releases: why nothing was charged (undefined when the release gave none, as those written before reasons). */
  readonly reason?: ReleaseReason;
  /** On adjustments: the operator's reason (decision 0037). */
  readonly note?: string;
  readonly at: Date;
}

/** Where a page of entries ended: its last entry (the next page is strictly older). */
export interface LedgerCursor {
  readonly seq: bigint;
  readonly at: Date;
}

/** One page of an account's entries, newest first. */
export interface LedgerEntryQuery {
  readonly accountId: string;
  readonly limit: number;
  /** Only entries older than this one (the previous page's last). */
  readonly before?: LedgerCursor;
  /** Only entries at or after this instant. */
  readonly from?: Date;
  /** Only entries strictly before this instant. */
  readonly to?: Date;
}

export interface LedgerEntryPage {
  readonly entries: LedgerEntry[];
  /** Set when more entries may match below the last one (a store may stop early with fewer than `limit`). */
  readonly next?: LedgerCursor;
}

export interface ReserveOptions {
  /** Shown on the hold's entries. */
  readonly memo?: HoldMemo;
  /** The key's limits to check; its spending is counted (charges always, by the hold's memo.keyId). */
  readonly key?: KeyReservation;
  /**
   * Refuse ("too_many_open_holds") when the account already has this many
   * open holds whose reservation id starts with `countedPrefix`, checked in
   * the same atomic step as the balance (MAX_QUEUED_JOBS_PER_ACCOUNT).
   */
  readonly maxOpenHolds?: { readonly limit: number; readonly countedPrefix: string; readonly exceptPrefix?: string };
}

/** One account as the operator's list shows it. */
export interface AccountListing {
  readonly accountId: string;
  readonly name: string;
  readonly balance: Money;
  readonly reserved: Money;
  /** Jobs whose holds are open (accepted, not finished). */
  readonly openJobs: number;
  readonly createdAt: Date;
}

/** One account as its page shows it (decision 0038): the listing, and its low-balance setting and state. */
export interface AccountDetails extends AccountListing {
  /** Undefined: no alert. */
  readonly lowBalanceThreshold?: Money;
  /** Available was below the threshold when last judged (a balance.low event was due). */
  readonly lowBalance: boolean;
}

/** What UpdateAccount changes: the fields present (a threshold of null removes the alert). */
export interface AccountChange {
  readonly name?: string;
  readonly lowBalanceThreshold?: Money | null;
}

/** Where a page of accounts ended: its last account's sort key (the name key, or the id) and id. */
export interface AccountCursor {
  readonly key: string;
  readonly accountId: string;
}

/** One page of accounts, by name key then id (`by: "name"`) or by id (`by: "id"`), those whose key starts with `prefix`. */
export interface AccountListQuery {
  readonly by: "name" | "id";
  /** For "name", already a name key (domain/accounts/account-listing.ts). */
  readonly prefix: string;
  readonly limit: number;
  readonly after?: AccountCursor;
}

export interface AccountListPage {
  readonly accounts: AccountListing[];
  /** Set when more accounts may match after the last one. */
  readonly next?: AccountCursor;
}

/**
 * What an operator's adjustment did: applied (the balance after it and its
 * entry), refused because a debit exceeded the available balance (nothing
 * moved), or the account is unknown.
 */
export type AdjustOutcome =
  | { readonly snapshot: BalanceSnapshot; readonly entry: LedgerEntry; readonly repeated?: true }
  | "insufficient_funds"
  | "unknown_account";

/**
 * What a credit did: the balance right after it (its entry's figures). `repeated`: the credit's operation id had
 * made an entry already, so nothing moved now and these are the figures of that entry (decision 0039).
 */
export interface Credited extends BalanceSnapshot {
  readonly repeated?: true;
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
  /**
   * Credits the account. `audit`, when given, is recorded with the credit in one atomic step (the same transaction; on
   * Cassandra in the credit's own round, copied out after): both or neither; none for an unknown account.
   */
  credit(accountId: string, amount: Money, audit?: AuditRecord, operationId?: string): Promise<Credited | undefined>;
  /**
   * An operator's adjustment: a signed, non-zero amount with its reason, in
   * one atomic step with its `adjustment` entry. A debit beyond the available
   * balance (balance − reserved) is refused and moves nothing. `audit`: as credit's.
   *
   * `operationId` (credit and adjust; decision 0039): the operation's name, kept with its entry for good. When an
   * entry of the account was made under it already, the same atomic step moves nothing, writes no audit, and answers
   * that entry (its balance figures), marked `repeated`: a retry after a crash applies the operation once.
   */
  adjust(accountId: string, amount: Money, reason: string, audit?: AuditRecord, operationId?: string): Promise<AdjustOutcome>;
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
  settle(accountId: string, reservationId: string, amount: Money, tokens?: SettledTokens): Promise<Settlement | undefined>;
  /** Ends the hold without charging; `reason` is shown on its entry. A no-op when already settled or released. */
  release(accountId: string, reservationId: string, reason?: ReleaseReason): Promise<void>;
  /** The account's recorded shortfalls (for operators and tests). */
  shortfalls(accountId: string): Promise<Shortfall[]>;
  /**
   * The account's entries, newest first (by seq), within the query's bounds.
   * Empty for an unknown account.
   */
  entries(query: LedgerEntryQuery): Promise<LedgerEntryPage>;
  /** One key's spending and open holds (zero for a key that never moved money). */
  keyAccount(accountId: string, keyId: string): Promise<KeyAccount>;
  /** A page of accounts, each read with its money (the operator's list); bounded by `limit`, never a scan of every account. */
  listAccounts(query: AccountListQuery): Promise<AccountListPage>;
  /** One account with its money and settings; undefined when unknown. */
  account(accountId: string): Promise<AccountDetails | undefined>;
  /**
   * Renames the account (its listing follows the new name on every backend)
   * and/or sets its low-balance threshold; the low-balance state is judged
   * again on the new threshold in the same step, without an event (decision
   * 0038). Undefined when the account is unknown.
   */
  updateAccount(accountId: string, change: AccountChange): Promise<AccountDetails | undefined>;
  /** Whether any account exists (for the first-start hint). */
  hasAnyAccount(): Promise<boolean>;
}
