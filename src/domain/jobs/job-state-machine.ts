import type { Job, JobResult, JobStatus, JobUsage } from "./job.js";
import type { Money } from "../money.js";

/**
 * The spec's section 3, with cancellation (issue 10). `queued → failed`
 * covers inputs found missing before work starts; a job is canceled while
 * queued or processing, never once finished.
 */
const TRANSITIONS: Readonly<Record<JobStatus, readonly JobStatus[]>> = {
  queued: ["processing", "failed", "canceled"],
  processing: ["done", "failed", "canceled"],
  done: [],
  failed: [],
  canceled: [],
};

export const TERMINAL_STATUSES: readonly JobStatus[] = ["done", "failed", "canceled"];

export function isTerminal(status: JobStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

export function canTransition(from: JobStatus, to: JobStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

export class IllegalTransitionError extends Error {
  constructor(readonly from: JobStatus, readonly to: JobStatus) {
    super(`a job cannot go from ${from} to ${to}`);
  }
}

function guard(job: Job, to: JobStatus): void {
  if (!canTransition(job.status, to)) throw new IllegalTransitionError(job.status, to);
}

export interface Lease {
  readonly owner: string;
  readonly expiresAt: Date;
}

export function startJob(job: Job, now: Date, lease?: Lease): Job {
  guard(job, "processing");
  return { ...job, status: "processing", startedAt: now, leaseOwner: lease?.owner, leaseExpiresAt: lease?.expiresAt };
}

/** Another worker takes over a job whose lease ran out; the job stays processing. */
export function takeOverJob(job: Job, lease: Lease): Job {
  if (job.status !== "processing") throw new IllegalTransitionError(job.status, "processing");
  return { ...job, leaseOwner: lease.owner, leaseExpiresAt: lease.expiresAt };
}

/** Marks a finished job's money as moved (see Job.settled). */
export function settleJob(job: Job, charged: Money = job.charged): Job {
  if (!isTerminal(job.status)) throw new Error(`job ${job.id} is ${job.status}: only a finished job is settled`);
  if (charged < 0n || charged > job.charged) throw new Error(`job ${job.id}: settled charge ${charged} outside 0..${job.charged}`);
  return { ...job, settled: true, charged };
}

/**
 * What clients see: a job whose outcome is decided but whose money has not
 * moved yet still shows as processing. The outcome is recorded first (so a
 * crash cannot lose it) and shown last (so balance and status always agree).
 */
export function publicState(job: Job): Job {
  if (!isTerminal(job.status) || job.settled) return job;
  return { ...job, status: "processing", finishedAt: undefined, result: undefined, error: undefined, errorMessage: undefined, charged: 0n };
}

export function leaseExpired(job: Job, now: Date): boolean {
  return job.status === "processing" && (job.leaseExpiresAt === undefined || job.leaseExpiresAt < now);
}

export function completeJob(job: Job, now: Date, result: JobResult, charged: Money, usage?: JobUsage): Job {
  guard(job, "done");
  return { ...job, status: "done", finishedAt: now, result, charged, usage, leaseOwner: undefined, leaseExpiresAt: undefined };
}

/**
 * Cancellation. `charged` is what the upstream reported as produced before
 * the abort (a text job's partial output, at the prices it was accepted
 * under); 0 for a queued job and for an image or video job, which produced
 * no result. Never more than what was reserved for an image or video job.
 */
/** Why a job was canceled, when it was not its owner's request: shown with the job (`client_gone`: its acceptance was never answered). */
export interface CancelReason {
  readonly error: string;
  readonly message: string;
}

export function cancelJob(job: Job, now: Date, charged: Money = 0n, usage?: JobUsage, reason?: CancelReason): Job {
  guard(job, "canceled");
  if (charged < 0n) throw new Error(`job ${job.id}: a cancellation cannot charge ${charged}`);
  if (charged > 0n && job.kind !== "text" && job.kind !== "multimodal_realtime") {
    throw new Error(`job ${job.id}: a canceled ${job.kind} job produced no result and is charged nothing`);
  }
  return {
    ...job, status: "canceled", finishedAt: now, charged, usage: usage ?? job.usage, result: undefined,
    error: reason?.error, errorMessage: reason?.message, leaseOwner: undefined, leaseExpiresAt: undefined,
  };
}

/** Whether finishing this job charges (settles its hold) or only releases it. */
export function chargesOnFinish(job: Job): boolean {
  if (!isTerminal(job.status)) throw new Error(`job ${job.id} is ${job.status}: only a finished job moves money`);
  return job.status === "done" || (job.status === "canceled" && job.charged > 0n);
}

export function failJob(job: Job, now: Date, error: string, errorMessage: string): Job {
  guard(job, "failed");
  return {
    ...job, status: "failed", finishedAt: now, error, errorMessage, charged: 0n, leaseOwner: undefined, leaseExpiresAt: undefined,
  };
}
