import type { Job } from "../../domain/jobs/job.js";
import type { Money } from "../../domain/money.js";
import type { AcceptanceOutcome, AcceptanceWrites, Announcement } from "../../ports/acceptance-writes.js";
import type { ReserveOptions, ReserveOutcome } from "../../ports/ledger.js";
import type { GroupedWrites } from "./grouped-writes.js";
import type { SqliteEventBus } from "./sqlite-event-bus.js";
import type { SqliteJobStore } from "./sqlite-job-store.js";
import type { SqliteLedger } from "./sqlite-ledger.js";

/** Thrown inside the transaction to roll back a reservation whose job cannot be stored. */
class NotStored extends Error {
  constructor(readonly reason: "fenced" | "exists") {
    super(reason);
  }
}

/**
 * An accepted job's writes in one transaction of the embedded file: the hold
 * reserved, the intent listed, the job stored and its announcement in the
 * bus's table; then, once committed, the bus's consumers woken. One write
 * where the steps one by one make three commits (decision 0023), and that write runs in the store's group
 * commit (GroupedWrites): concurrent accepts share a commit.
 */
export class SqliteAcceptanceWrites implements AcceptanceWrites {
  /** The write, run by the group commit as a savepoint of its transaction (a NotStored thrown undoes it). */
  private readonly write: (job: Job, amount: Money, options: ReserveOptions, announcement: Announcement) => { outcome: ReserveOutcome; groups: string[] };

  constructor(jobs: SqliteJobStore, ledger: SqliteLedger, private readonly bus: SqliteEventBus, private readonly writes: GroupedWrites) {
    this.write = (job, amount, options, announcement) => {
      const outcome = ledger.reserveNow(job.accountId, job.reservationId, amount, options);
      if (outcome !== "reserved") return { outcome, groups: [] };
      jobs.registerIntentNow(job.id, job.accountId, job.createdAt);
      const stored = jobs.createNow(job);
      if (stored !== "created") throw new NotStored(stored);
      const groups = bus.publishNow(announcement.topic, announcement.key, announcement.event, announcement.options);
      return { outcome, groups };
    };
  }

  async accept(
    job: Job, hold: { readonly amount: Money; readonly options: ReserveOptions }, announcement: Announcement,
  ): Promise<AcceptanceOutcome> {
    let written: { outcome: ReserveOutcome; groups: string[] };
    try {
      written = await this.writes.run(() => this.write(job, hold.amount, hold.options, announcement));
    } catch (error) {
      if (error instanceof NotStored) return error.reason;
      throw error;
    }
    this.bus.published(announcement.topic, written.groups);
    return written.outcome;
  }
}
