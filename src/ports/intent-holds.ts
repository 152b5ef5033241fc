import type { Money } from "../domain/money.js";
import type { ReserveOptions, ReserveOutcome } from "./ledger.js";

/**
 * An intent listed as unfinished and its hold reserved in one write, for
 * stores that keep jobs and money in one database (the embedded SQLite
 * file). The outcome is that of `JobStore.registerIntent`, then
 * `Ledger.reserve`, then `JobStore.markFinalized` when the reservation is
 * refused (core/money/holds.ts takes those steps itself where this port is
 * absent): reserved, the intent is listed and the hold open; refused, neither.
 * One commit instead of two (three when refused).
 */
export interface IntentHolds {
  registerAndReserve(
    intentId: string, accountId: string, since: Date, reservationId: string, amount: Money, options: ReserveOptions,
  ): Promise<ReserveOutcome>;
}
