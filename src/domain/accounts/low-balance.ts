import type { Money } from "../money.js";

/**
 * The low-balance alert's rule (decision 0038), judged by the ledger in the
 * atomic step of every movement: "crossed" when available falls below the
 * threshold while the account was not low (one balance.low event is due),
 * "rearmed" when available is back at or above it (or the alert is removed)
 * while it was low; undefined when the state stays.
 */
export function lowBalanceTransition(available: Money, threshold: Money | undefined, low: boolean): "crossed" | "rearmed" | undefined {
  const below = threshold !== undefined && available < threshold;
  if (below && !low) return "crossed";
  if (!below && low) return "rearmed";
  return undefined;
}

/** The state a new threshold leaves, judged without an event (a setting is not a movement). */
export const isLowBalance = (available: Money, threshold: Money | undefined): boolean => threshold !== undefined && available < threshold;
