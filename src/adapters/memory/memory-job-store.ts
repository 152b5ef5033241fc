import { isTerminal } from "../../domain/jobs/job-state-machine.js";
import type { Job } from "../../domain/jobs/job.js";
import { compareNewestFirst, inListing, type JobListQuery } from "../../domain/jobs/job-list.js";
import type { JobExpectation, JobPage, JobStore, UnfinishedJob } from "../../ports/job-store.js";

export class MemoryJobStore implements JobStore {
  private readonly jobs = new Map<string, Job>();
  private readonly unfinished = new Map<string, { accountId: string; since: Date }>();

  async registerIntent(jobId: string, accountId: string, since: Date): Promise<void> {
    this.unfinished.set(jobId, { accountId, since });
  }

  private readonly abandoned = new Set<string>();

  async create(job: Job): Promise<void> {
    if (this.jobs.has(job.id) || this.abandoned.has(job.id)) throw new Error(`job ${job.id} exists or was abandoned`);
    this.jobs.set(job.id, job);
  }

  /** Idempotent: true again for an id already fenced. */
  async abandonIntent(jobId: string): Promise<boolean> {
    if (this.jobs.has(jobId)) return false;
    this.abandoned.add(jobId);
    return true;
  }

  async get(jobId: string): Promise<Job | undefined> {
    return this.jobs.get(jobId);
  }

  async transition(next: Job, expected: JobExpectation): Promise<boolean> {
    const current = this.jobs.get(next.id);
    if (!current || current.status !== expected.status) return false;
    if (expected.leaseOwner !== undefined && current.leaseOwner !== expected.leaseOwner) return false;
    this.jobs.set(next.id, next);
    return true;
  }

  async renewLease(jobId: string, owner: string, expiresAt: Date): Promise<boolean> {
    const current = this.jobs.get(jobId);
    if (!current || current.status !== "processing" || current.leaseOwner !== owner) return false;
    this.jobs.set(jobId, { ...current, leaseExpiresAt: expiresAt });
    return true;
  }

  async listUnfinished(limit: number, after?: string): Promise<{ entries: UnfinishedJob[]; next?: string }> {
    const ids = [...this.unfinished.keys()];
    const start = after === undefined ? 0 : Number(after);
    const page = ids.slice(start, start + limit);
    const entries = page.map((jobId) => ({ jobId, ...this.unfinished.get(jobId)!, job: this.jobs.get(jobId) }));
    return { entries, next: start + limit < ids.length ? String(start + limit) : undefined };
  }

  async markFinalized(jobId: string): Promise<void> {
    this.unfinished.delete(jobId);
  }

  /** A scan of every job: the memory store serves tests and small embedded uses. */
  async listByAccount(query: JobListQuery): Promise<JobPage> {
    const position = (job: Job) => ({ createdAt: job.createdAt, jobId: job.id });
    const matching = [...this.jobs.values()].filter((job) => inListing(job, query));
    matching.sort((a, b) => compareNewestFirst(position(a), position(b)));
    const jobs = matching.slice(0, query.limit);
    return { jobs, next: matching.length > query.limit ? position(jobs[jobs.length - 1]!) : undefined };
  }

  /** Finished, finalized jobs only (their deliveries live in the delivery log, which keeps its own). */
  async purgeFinished(finishedBefore: Date, limit: number): Promise<number> {
    let removed = 0;
    for (const [jobId, job] of this.jobs) {
      if (removed >= limit) break;
      const finished = isTerminal(job.status) && job.finishedAt !== undefined;
      if (finished && job.finishedAt! < finishedBefore && !this.unfinished.has(jobId)) {
        this.jobs.delete(jobId);
        removed++;
      }
    }
    return removed;
  }
}
