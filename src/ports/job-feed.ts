import type { JobStatus } from "../domain/jobs/job.js";

/**
 * What the feed carries: a job's public state changed (a watcher reads the
 * job again), or its owner asked to cancel it (the worker generating it
 * aborts). A signal says only which job to look at: the store stays the
 * truth, so a lost or repeated signal costs a late or an extra read, never a
 * wrong answer.
 */
export type JobSignal =
  | { readonly kind: "changed"; readonly jobId: string; readonly status: JobStatus }
  | { readonly kind: "cancel"; readonly jobId: string };

/**
 * Job lifecycle signals, broadcast to every process (unlike the event bus,
 * whose consumer groups share the work): each process hears every signal
 * published after it started listening, by itself or any other. Delivery is
 * best effort and nothing is replayed, so listeners pair it with a read of the
 * store when they start and a slow fallback read.
 */
export interface JobFeed {
  /** Sends the signal to every process listening; rejects when it could not be sent. */
  publish(signal: JobSignal, abort?: AbortSignal): Promise<void>;
  /** Calls `handler` for every signal from now on; the returned function stops it. */
  listen(handler: (signal: JobSignal) => void): () => void;
  close(): Promise<void>;
}
