import type { KeyLimits, KeySpending } from "../../domain/accounts/key-limits.js";

/** Key limits as stored (JSON; money as decimal strings of picodollars). "" or null: no limits. */
export function encodeKeyLimits(limits: KeyLimits | undefined): string {
  if (!limits || Object.keys(limits).length === 0) return "";
  return JSON.stringify({
    spendLimit: limits.spendLimit?.toString(),
    dailySpendLimit: limits.dailySpendLimit?.toString(),
    monthlySpendLimit: limits.monthlySpendLimit?.toString(),
    ratePerMinute: limits.ratePerMinute,
    maxConcurrentJobs: limits.maxConcurrentJobs,
  });
}

export function decodeKeyLimits(text: string | null | undefined): KeyLimits {
  if (!text) return {};
  const raw = JSON.parse(text) as Record<string, string | number | undefined>;
  const limits: Record<string, bigint | number> = {};
  for (const field of ["spendLimit", "dailySpendLimit", "monthlySpendLimit"] as const) {
    if (typeof raw[field] === "string") limits[field] = BigInt(raw[field]);
  }
  for (const field of ["ratePerMinute", "maxConcurrentJobs"] as const) {
    if (typeof raw[field] === "number") limits[field] = raw[field];
  }
  return limits as KeyLimits;
}

/** A key's spending as stored next to the account's money (JSON; money as decimal strings). */
export function encodeKeySpending(spending: KeySpending): string {
  return JSON.stringify({ ...spending, total: spending.total.toString(), dayTotal: spending.dayTotal.toString(), monthTotal: spending.monthTotal.toString() });
}

export function decodeKeySpending(text: string): KeySpending {
  const raw = JSON.parse(text) as Record<string, string | number>;
  return {
    total: BigInt(raw.total!), day: String(raw.day), dayTotal: BigInt(raw.dayTotal!), month: String(raw.month), monthTotal: BigInt(raw.monthTotal!),
    minute: Number(raw.minute), requests: Number(raw.requests),
  };
}
