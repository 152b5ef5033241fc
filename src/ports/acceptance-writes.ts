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
 * An accepted job's writes: its intent listed as unfinished, its hold
 * reserved (`ReserveOutcome` as Ledger.reserve), the job stored, and its
 * announcement published. Every store set offers this port, and the core
 * accepts a job only through it (one path). Stores and a bus that share one
 * database (the embedded SQLite file with its own bus) do all four in one
 * transaction; the others take the steps one by one behind the port
 * (adapters/shared/stepwise-acceptance-writes.ts) and leave the announcement
 * to the caller.
 *
 * "reserved": all four are done. "stored": the intent, the hold and the job
 * are; the caller announces it. Refused: none is. "fenced": nothing of this
 * acceptance stands (a hold taken is released); a retry with the same
 * Idempotency-Key found this acceptance dead and abandoned its job id
 * (JobStore.abandonIntent). "exists": nothing is written, because the job was
 * stored before, with its hold (JobStore.create would have failed on it); it
 * counts as accepted, and is announced again.
 *
 * Throws AcceptanceOutcomeUnknown when the hold was taken and whether the job
 * was stored cannot be known now; any other error before that leaves what the
 * reaper finishes (an intent listed, perhaps a hold).
 */
export interface AcceptanceWrites {
  accept(job: Job, hold: { readonly amount: Money; readonly options: ReserveOptions }, announcement: Announcement): Promise<AcceptanceOutcome>;
}

export type AcceptanceOutcome = ReserveOutcome | "stored" | "fenced" | "exists";

/** The hold was taken and the store went away while the job was being stored: whether it was is unknown. */
export class AcceptanceOutcomeUnknown extends Error {
  constructor(readonly dependency: string, options: { cause: unknown }) {
    super(`${dependency} went away while the job was being stored`, options);
  }
}
