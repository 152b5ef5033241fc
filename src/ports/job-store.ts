import type { Job, JobStatus } from "../domain/jobs/job.js";

/** Jobs by id. Every state change is a compare-and-set on the status. */
export interface JobStore {
  create(job: Job): Promise<void>;
  get(jobId: string): Promise<Job | undefined>;
  /** Stores `next` only if the stored job is still `expected`; false when someone else moved it. */
  transition(next: Job, expected: JobStatus): Promise<boolean>;
}
