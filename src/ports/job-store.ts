import type { Job, JobStatus } from "../domain/jobs/job.js";
import type { JobCursor, JobListQuery } from "../domain/jobs/job-list.js";

/** One page of an account's jobs, newest first. */
export interface JobPage {
  readonly jobs: Job[];
  /** Where the next page starts (strictly below it); undefined when nothing more matches. */
  readonly next?: JobCursor;
}

/** What a compare-and-set expects to find. */
export interface JobExpectation {
  readonly status: JobStatus;
  /** When given, the stored lease owner must match too (a takeover must not race another takeover). */
  readonly leaseOwner?: string;
}

/** A job id from the moment its money may be held until the job is finalized. */
export interface UnfinishedJob {
  readonly jobId: string;
  readonly accountId: string;
  readonly since: Date;
  /** Undefined when acceptance stopped (crashed) before the job was stored. */
  readonly job?: Job;
}

/**
 * Jobs by id. Every change is a compare-and-set, so a duplicated or replayed
 * event can never move a job twice. Jobs stay "unfinished" from creation until
 * their money and completion event are done (markFinalized), which is what
 * the reaper scans after a crash.
 */
export interface JobStore {
  /**
   * Lists a job id as unfinished before its price is reserved, so that a crash
   * between reservation and creation leaves a trace the reaper can release.
   */
  registerIntent(jobId: string, accountId: string, since: Date): Promise<void>;
  create(job: Job): Promise<void>;
  /**
   * Fences off an acceptance that never stored its job: after this returns
   * true, create() of that id fails, so releasing its hold cannot race a job
   * that still appears. False when the job was stored meanwhile. Idempotent:
   * true again for an id already fenced (by anyone).
   */
  abandonIntent(jobId: string): Promise<boolean>;
  get(jobId: string): Promise<Job | undefined>;
  /** Stores `next` only if the stored job matches `expected`; false when someone else moved it. */
  transition(next: Job, expected: JobExpectation): Promise<boolean>;
  /** Extends the lease of a processing job held by `owner`; false when the job is no longer theirs. */
  renewLease(jobId: string, owner: string, expiresAt: Date): Promise<boolean>;
  /**
   * Ids registered and not yet finalized: being accepted, queued, processing,
   * or finished but not settled and announced. `after` continues a scan where
   * the previous page ended (undefined starts over), so a large backlog is
   * scanned whole over successive calls.
   */
  listUnfinished(limit: number, after?: string): Promise<{ entries: UnfinishedJob[]; next?: string }>;
  markFinalized(jobId: string): Promise<void>;
  /**
   * One page of an account's jobs matching the query's filters, ordered by
   * (createdAt, id) descending, all strictly below `query.after` when given
   * (see inListing and compareNewestFirst in domain/jobs/job-list.ts). At most
   * `limit` jobs; `next` is set when more may match. A store may stop early
   * with fewer jobs (it bounds the work of one page) and still set `next`.
   */
  listByAccount(query: JobListQuery): Promise<JobPage>;
  /**
   * Retention: removes up to `limit` jobs that finished (done or failed, and
   * finalized) before `finishedBefore`, with what is stored only for them
   * (webhook deliveries). Returns how many were removed; stores whose finished
   * jobs expire by themselves (a TTL written at the end) return 0.
   */
  purgeFinished(finishedBefore: Date, limit: number): Promise<number>;
}
