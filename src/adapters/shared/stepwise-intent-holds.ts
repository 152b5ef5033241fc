import type { Money } from "../../domain/money.js";
import type { HoldEnd, IntentHolds } from "../../ports/intent-holds.js";
import type { JobStore } from "../../ports/job-store.js";
import type { Ledger, ReserveOptions, ReserveOutcome, Settlement } from "../../ports/ledger.js";

/**
 * IntentHolds for stores that keep jobs and money apart (in memory, on
 * Cassandra): the steps one by one, each idempotent, in the order that
 * leaves a trace the reaper can finish after a crash. The intent is listed
 * before the reservation, so a crash between them leaves an intent (no hold)
 * the reaper abandons; a refused reservation unlists it. At the other end
 * the hold is ended first and the intent unlisted after, so a crash between
 * them leaves an intent whose hold is ended, which the reaper ends again (a
 * no-op) and unlists.
 */
export class StepwiseIntentHolds implements IntentHolds {
  constructor(private readonly jobs: JobStore, private readonly ledger: Ledger) {}

  async registerAndReserve(
    intentId: string, accountId: string, since: Date, reservationId: string, amount: Money, options: ReserveOptions,
  ): Promise<ReserveOutcome> {
    await this.jobs.registerIntent(intentId, accountId, since);
    const outcome = await this.ledger.reserve(accountId, reservationId, amount, options);
    if (outcome !== "reserved") await this.jobs.markFinalized(intentId);
    return outcome;
  }

  async endAndFinalize(intentId: string, accountId: string, reservationId: string, end: HoldEnd): Promise<Settlement | undefined> {
    let settlement: Settlement | undefined;
    if ("release" in end) await this.ledger.release(accountId, reservationId, end.release);
    else settlement = await this.ledger.settle(accountId, reservationId, end.charge, end.tokens);
    await this.jobs.markFinalized(intentId);
    return settlement;
  }
}
