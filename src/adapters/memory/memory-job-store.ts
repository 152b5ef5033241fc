import type { Job, JobStatus } from "../../domain/jobs/job.js";
import type { JobStore } from "../../ports/job-store.js";

export class MemoryJobStore implements JobStore {
  private readonly jobs = new Map<string, Job>();

  async create(job: Job): Promise<void> {
    if (this.jobs.has(job.id)) throw new Error(`job ${job.id} exists`);
    this.jobs.set(job.id, job);
  }

  async get(jobId: string): Promise<Job | undefined> {
    return this.jobs.get(jobId);
  }

  async transition(next: Job, expected: JobStatus): Promise<boolean> {
    const current = this.jobs.get(next.id);
    if (!current || current.status !== expected) return false;
    this.jobs.set(next.id, next);
    return true;
  }
}
