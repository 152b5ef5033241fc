import type { Job } from "../domain/jobs/job.js";
import type { Money } from "../domain/money.js";
import type { PublishOptions, Topic } from "./event-bus.js";
import type { ReserveOptions, ReserveOutcome } from "./ledger.js";

/** The announcement of an accepted job, as EventBus.publish takes it. */
export interface Announcement {
  readonly topic: Topic;
  readonly key: string;
  readonly event: unknown;
  readonly options?: PublishOptions;
}

/**
 * An accepted job's writes in one transaction, for stores and a bus that
 * share one database (the embedded SQLite file): its intent listed as
 * unfinished, its hold reserved (`ReserveOutcome` as Ledger.reserve), the
 * job stored and its announcement published. Where this port is absent the
 * core takes the steps one by one (an intent and hold, the job, the
 * announcement: three commits instead of one).
 *
 * Reserved: all four are done. Refused: none is. "fenced": none is; a retry
 * with the same Idempotency-Key found this acceptance dead and abandoned its
 * job id (JobStore.abandonIntent). "exists": none is, because the job was
 * stored before, with its hold (JobStore.create would have failed on it); it
 * counts as accepted, and is announced again.
 */
export interface AcceptanceWrites {
  accept(job: Job, hold: { readonly amount: Money; readonly options: ReserveOptions }, announcement: Announcement): Promise<ReserveOutcome | "fenced" | "exists">;
}
