import { badRequest } from "../errors/domain-error.js";
import { formatMoney, type Money } from "../money.js";
import { MAX_BALANCE, parseAmountField } from "../validation/amounts.js";

/**
 * Per-key limits (issue 10): a key may carry spend limits (in total, per UTC
 * day, per UTC month) and rate limits (reservations per minute, jobs at once).
 * They are checked in the same atomic step as the reservation they govern
 * (the ledger applies these rules to its own state), so no number of
 * processes racing can take a key past them.
 */

export interface KeyLimits {
  readonly spendLimit?: Money;
  readonly dailySpendLimit?: Money;
  readonly monthlySpendLimit?: Money;
  /** Reservations (jobs accepted, synchronous text calls) per UTC minute. */
  readonly ratePerMinute?: number;
  /** The key's jobs accepted and not finished (synchronous text calls do not count). */
  readonly maxConcurrentJobs?: number;
}

/** What a key has spent (settled charges), by period, and its rate window: kept by the ledger with the account's money. */
export interface KeySpending {
  readonly total: Money;
  /** The UTC day (YYYY-MM-DD) `dayTotal` is for. */
  readonly day: string;
  readonly dayTotal: Money;
  /** The UTC month (YYYY-MM) `monthTotal` is for. */
  readonly month: string;
  readonly monthTotal: Money;
  /** The UTC minute (since the epoch) `requests` counts. */
  readonly minute: number;
  readonly requests: number;
}

export const NO_SPENDING: KeySpending = { total: 0n, day: "", dayTotal: 0n, month: "", monthTotal: 0n, minute: 0, requests: 0 };

/** A key's open holds, as the ledger sees them at the reservation. */
export interface KeyHolds {
  /** The sum of the key's open holds (jobs and text calls). */
  readonly held: Money;
  /** The key's open job holds. */
  readonly openJobs: number;
}

/** A key with no open holds. */
export const NO_HOLDS: KeyHolds = { held: 0n, openJobs: 0 };

/**
 * Whether keyAdmission reads the key's open holds under these limits (a job
 * limit, or any spend limit): a ledger need not count them otherwise.
 */
export function admissionNeedsHolds(limits: KeyLimits): boolean {
  return limits.maxConcurrentJobs !== undefined || limits.spendLimit !== undefined ||
    limits.dailySpendLimit !== undefined || limits.monthlySpendLimit !== undefined;
}

export type KeyRefusal =
  | { readonly kind: "spend"; readonly limit: "spend_limit" | "daily_spend_limit" | "monthly_spend_limit" }
  | { readonly kind: "rate"; readonly retryAfterSeconds: number }
  | { readonly kind: "concurrency" };

const dayOf = (now: Date) => now.toISOString().slice(0, 10);
const monthOf = (now: Date) => now.toISOString().slice(0, 7);
const minuteOf = (now: Date) => Math.floor(now.getTime() / 60_000);

/** Spent in the period that contains `now` (a total kept for an earlier period counts as nothing). */
export function spentToday(spending: KeySpending, now: Date): Money {
  return spending.day === dayOf(now) ? spending.dayTotal : 0n;
}

export function spentThisMonth(spending: KeySpending, now: Date): Money {
  return spending.month === monthOf(now) ? spending.monthTotal : 0n;
}

/**
 * Whether the key may reserve `amount` now, in this order: requests this
 * minute (429, retry when the minute ends), jobs at once (429), then each
 * spend limit, counting what is spent in its period plus every open hold of
 * the key plus this amount (402). Undefined: admitted.
 */
export function keyAdmission(
  limits: KeyLimits, spending: KeySpending, holds: KeyHolds, amount: Money, isJob: boolean, now: Date,
): KeyRefusal | undefined {
  if (limits.ratePerMinute !== undefined) {
    const used = spending.minute === minuteOf(now) ? spending.requests : 0;
    if (used >= limits.ratePerMinute) {
      const intoMinute = now.getTime() % 60_000;
      return { kind: "rate", retryAfterSeconds: Math.max(1, Math.ceil((60_000 - intoMinute) / 1000)) };
    }
  }
  if (isJob && limits.maxConcurrentJobs !== undefined && holds.openJobs >= limits.maxConcurrentJobs) return { kind: "concurrency" };
  const committed = holds.held + amount;
  if (limits.spendLimit !== undefined && spending.total + committed > limits.spendLimit) return { kind: "spend", limit: "spend_limit" };
  if (limits.dailySpendLimit !== undefined && spentToday(spending, now) + committed > limits.dailySpendLimit) {
    return { kind: "spend", limit: "daily_spend_limit" };
  }
  if (limits.monthlySpendLimit !== undefined && spentThisMonth(spending, now) + committed > limits.monthlySpendLimit) {
    return { kind: "spend", limit: "monthly_spend_limit" };
  }
  return undefined;
}

/**
 * Whether a key may be answered an Idempotency-Key replay of a job priced
 * `price`: a replay reserves nothing, so rate, concurrency and what the key
 * spent do not apply, but a spend limit below the price is refused as a new
 * request for it would be (a key could never have reserved it).
 */
export function replayAdmission(limits: KeyLimits, price: Money): KeyRefusal | undefined {
  if (limits.spendLimit !== undefined && price > limits.spendLimit) return { kind: "spend", limit: "spend_limit" };
  if (limits.dailySpendLimit !== undefined && price > limits.dailySpendLimit) return { kind: "spend", limit: "daily_spend_limit" };
  if (limits.monthlySpendLimit !== undefined && price > limits.monthlySpendLimit) return { kind: "spend", limit: "monthly_spend_limit" };
  return undefined;
}

/** A reservation was made: it counts in this minute's requests. */
export function countReservation(spending: KeySpending, now: Date): KeySpending {
  const minute = minuteOf(now);
  return { ...spending, minute, requests: spending.minute === minute ? spending.requests + 1 : 1 };
}

/** A charge was settled: it counts in the total, today's and this month's spend. */
export function countCharge(spending: KeySpending, charged: Money, now: Date): KeySpending {
  const day = dayOf(now);
  const month = monthOf(now);
  return {
    ...spending,
    total: spending.total + charged,
    day,
    dayTotal: spentToday(spending, now) + charged,
    month,
    monthTotal: spentThisMonth(spending, now) + charged,
  };
}

/** What GET /admin/v1/keys/{id} reports: spent by period, held, and what each spend limit leaves (never below zero). */
export interface KeyStanding {
  readonly spent: Money;
  readonly spentToday: Money;
  readonly spentThisMonth: Money;
  readonly held: Money;
  readonly remaining?: Money;
  readonly remainingToday?: Money;
  readonly remainingThisMonth?: Money;
}

export function keyStanding(limits: KeyLimits, spending: KeySpending, held: Money, now: Date): KeyStanding {
  const left = (limit: Money | undefined, spent: Money) => (limit === undefined ? undefined : limit - spent - held > 0n ? limit - spent - held : 0n);
  const today = spentToday(spending, now);
  const month = spentThisMonth(spending, now);
  return {
    spent: spending.total, spentToday: today, spentThisMonth: month, held,
    remaining: left(limits.spendLimit, spending.total),
    remainingToday: left(limits.dailySpendLimit, today),
    remainingThisMonth: left(limits.monthlySpendLimit, month),
  };
}

/** The highest rate and concurrency a key may be given. */
export const MAX_RATE_PER_MINUTE = 1_000_000;
export const MAX_CONCURRENT_JOBS = 100_000;

/** Key limits as an operator sends them: decimal strings and integers; null (or absent) means none. */
export interface KeyLimitsInput {
  readonly spendLimit?: string | null;
  readonly dailySpendLimit?: string | null;
  readonly monthlySpendLimit?: string | null;
  readonly ratePerMinute?: number | null;
  readonly maxConcurrentJobs?: number | null;
}

function limitAmount(field: string, value: string | null | undefined): Money | undefined {
  if (value === undefined || value === null) return undefined;
  try {
    return parseAmountField(field, value, { reason: "invalid_key_limit", allowZero: true, max: MAX_BALANCE });
  } catch (error) {
    // Out of range or malformed: 400, as every limit of the API.
    throw badRequest("invalid_key_limit", (error as Error).message, { field, max: formatMoney(MAX_BALANCE) });
  }
}

function limitCount(field: string, value: number | null | undefined, max: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw badRequest("invalid_key_limit", `${field} must be an integer from 1 to ${max} (got ${value})`, { field });
  }
  return value;
}

/** Checks every field; a field left out (or null) is no limit. */
export function parseKeyLimits(input: KeyLimitsInput): KeyLimits {
  return dropUndefined({
    spendLimit: limitAmount("spend_limit", input.spendLimit),
    dailySpendLimit: limitAmount("daily_spend_limit", input.dailySpendLimit),
    monthlySpendLimit: limitAmount("monthly_spend_limit", input.monthlySpendLimit),
    ratePerMinute: limitCount("rate_limit_per_minute", input.ratePerMinute, MAX_RATE_PER_MINUTE),
    maxConcurrentJobs: limitCount("max_concurrent_jobs", input.maxConcurrentJobs, MAX_CONCURRENT_JOBS),
  });
}

/** A change of limits: fields not mentioned keep their value, null removes a limit. */
export function changeKeyLimits(current: KeyLimits, change: { [K in keyof KeyLimitsInput]?: KeyLimitsInput[K] }, mentioned: ReadonlySet<keyof KeyLimits>): KeyLimits {
  const parsed = parseKeyLimits(change);
  const next: Record<string, unknown> = { ...current };
  for (const field of mentioned) next[field] = parsed[field];
  return dropUndefined(next as KeyLimits);
}

function dropUndefined(limits: KeyLimits): KeyLimits {
  return Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== undefined)) as KeyLimits;
}
