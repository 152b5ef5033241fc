import type { Job } from "../../domain/jobs/job.js";
import type { Money } from "../../domain/money.js";
import { AcceptanceOutcomeUnknown, type AcceptanceOutcome, type AcceptanceWrites } from "../../ports/acceptance-writes.js";
import { isDependencyUnavailable } from "../../ports/dependency.js";
import type { IntentHolds } from "../../ports/intent-holds.js";
import type { JobStore } from "../../ports/job-store.js";
import type { Ledger, ReserveOptions } from "../../ports/ledger.js";

/**
 * AcceptanceWrites for stores that cannot write an acceptance in one
 * transaction with the bus (in memory, on Cassandra, SQLite with Kafka): the
 * hold (intent and reservation, IntentHolds), then the job; the caller
 * announces it ("stored"). A job id a retry fenced off in between
 * (JobStore.create fails and the job is not there) has its hold released and
 * its intent unlisted ("fenced"); a job found stored after all counts as
 * stored.
 */
export class StepwiseAcceptanceWrites implements AcceptanceWrites {
  constructor(private readonly jobs: JobStore, private readonly ledger: Ledger, private readonly intentHolds: IntentHolds) {}

  async accept(job: Job, hold: { readonly amount: Money; readonly options: ReserveOptions }): Promise<AcceptanceOutcome> {
    const outcome = await this.intentHolds.registerAndReserve(job.id, job.accountId, job.createdAt, job.reservationId, hold.amount, hold.options);
    if (outcome !== "reserved") return outcome;
    try {
      await this.jobs.create(job);
      return "stored";
    } catch (error) {
      if (isDependencyUnavailable(error)) throw new AcceptanceOutcomeUnknown(error.dependency, { cause: error });
      if (await this.stored(job, error)) return "stored";
      // Fenced off: a retry with the same key found this acceptance dead and took the key over.
      await this.ledger.release(job.accountId, job.reservationId, "abandoned");
      await this.jobs.markFinalized(job.id);
      return "fenced";
    }
  }

  /** Whether the job is stored after its create failed with `createError`. */
  private async stored(job: Job, createError: unknown): Promise<boolean> {
    try {
      return (await this.jobs.get(job.id)) !== undefined;
    } catch (readError) {
      if (isDependencyUnavailable(readError)) throw new AcceptanceOutcomeUnknown(readError.dependency, { cause: createError });
      throw readError;
    }
  }
}
