import type { Money } from "../domain/money.js";
import type { ReleaseReason } from "../domain/ledger/release-reasons.js";
import type { ReserveOptions, ReserveOutcome, Settlement, SettledTokens } from "./ledger.js";

/**
 * An intent listed as unfinished and its hold reserved in one write, for
 * stores that keep jobs and money in one database (the embedded SQLite
 * file). The outcome is that of `JobStore.registerIntent`, then
 * `Ledger.reserve`, then `JobStore.markFinalized` when the reservation is
 * refused (core/money/holds.ts takes those steps itself where this port is
 * absent): reserved, the intent is listed and the hold open; refused, neither.
 * One commit instead of two (three when refused).
 *
 * And the other end: a hold ended (settled for what was delivered, or
 * released) and its intent no longer listed, in one write. The outcome is
 * that of `Ledger.settle` (or `Ledger.release`: undefined), then
 * `JobStore.markFinalized`. For an intent that nothing else finishes: a
 * synchronous text call, an abandoned acceptance.
 */
export interface IntentHolds {
  registerAndReserve(
    intentId: string, accountId: string, since: Date, reservationId: string, amount: Money, options: ReserveOptions,
  ): Promise<ReserveOutcome>;
  endAndFinalize(intentId: string, reservationId: string, end: HoldEnd): Promise<Settlement | undefined>;
}

/** How a hold ends: charged `amount` (at most hold + available; tokens for the statement), or released (for `reason`, shown on its entry). */
export type HoldEnd = { readonly charge: Money; readonly tokens?: SettledTokens } | { readonly release: ReleaseReason };
