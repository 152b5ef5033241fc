import type { Money } from "../domain/money.js";
import type { ReleaseReason } from "../domain/ledger/release-reasons.js";
import type { ReserveOptions, ReserveOutcome, Settlement, SettledTokens } from "./ledger.js";

/**
 * An intent and its hold, together: every store set offers this port, and
 * core/money/holds.ts takes and ends intents' holds only through it (one
 * money path in the core). Its outcome is that of `JobStore.registerIntent`,
 * then `Ledger.reserve`, then `JobStore.markFinalized` when the reservation
 * is refused: reserved, the intent is listed and the hold open; refused,
 * neither. Stores that keep jobs and money in one database (the embedded
 * SQLite file) do it in one write; the others take the steps one by one
 * behind the port (adapters/shared/stepwise-intent-holds.ts).
 *
 * And the other end: a hold ended (settled for what was delivered, or
 * released) and its intent no longer listed. The outcome is that of
 * `Ledger.settle` (or `Ledger.release`: undefined), then
 * `JobStore.markFinalized`. For an intent that nothing else finishes: a
 * synchronous text call, an abandoned acceptance.
 */
export interface IntentHolds {
  registerAndReserve(
    intentId: string, accountId: string, since: Date, reservationId: string, amount: Money, options: ReserveOptions,
  ): Promise<ReserveOutcome>;
  endAndFinalize(intentId: string, accountId: string, reservationId: string, end: HoldEnd): Promise<Settlement | undefined>;
}

/** How a hold ends: charged `amount` (at most hold + available; tokens for the statement), or released (for `reason`, shown on its entry). */
export type HoldEnd = { readonly charge: Money; readonly tokens?: SettledTokens } | { readonly release: ReleaseReason };
