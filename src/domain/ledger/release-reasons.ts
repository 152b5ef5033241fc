import type { Job } from "../jobs/job.js";

/**
 * Why a hold was released (nothing charged), shown on the statement's
 * release entries. Information only: a reason never changes what moves.
 * - `job_failed`: the job failed;
 * - `job_canceled`: the job was canceled (by its owner) with nothing to charge;
 * - `client_gone`: the job was canceled because its acceptance could not be
 *   answered (the client went away before the 202, with no Idempotency-Key);
 * - `nothing_delivered`: a synchronous text call ended with nothing delivered;
 * - `abandoned`: the hold's owner died before finishing it (an acceptance
 *   that never stored its job, or a text call), found by the reaper or by a
 *   retry with the same Idempotency-Key.
 */
export const RELEASE_REASONS = ["job_failed", "job_canceled", "client_gone", "nothing_delivered", "abandoned"] as const;

export type ReleaseReason = (typeof RELEASE_REASONS)[number];

/** The job error of a job canceled because its acceptance was never answered (core/jobs/cancel-job.ts). */
export const CLIENT_GONE_ERROR = "client_gone";

/** Why a finished job that charges nothing releases its hold. */
export function jobReleaseReason(job: Pick<Job, "status" | "error">): ReleaseReason {
  if (job.status === "failed") return "job_failed";
  return job.error === CLIENT_GONE_ERROR ? "client_gone" : "job_canceled";
}

/** A stored reason as the statement shows it: one of RELEASE_REASONS, else none (a row written before reasons, or by a newer version). */
export function readReleaseReason(stored: unknown): ReleaseReason | undefined {
  return typeof stored === "string" && (RELEASE_REASONS as readonly string[]).includes(stored) ? (stored as ReleaseReason) : undefined;
}
