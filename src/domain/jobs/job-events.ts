import { badRequest } from "../errors/domain-error.js";
import type { JobStatus } from "./job.js";
import { isTerminal } from "./job-state-machine.js";

/**
 * The rules of following a job (WatchJob, GET /api/v1/jobs/{id}/events, and
 * creation with Prefer: wait). A watcher sees each public state once, in
 * order; an event's id is the state's place in the job's life, so a client
 * that resumes with the last id it received sees only what came after it.
 */

/** "1" queued, "2" processing, "3" finished (done, failed or canceled). */
export function eventIdOf(status: JobStatus): string {
  if (isTerminal(status)) return "3";
  return status === "processing" ? "2" : "1";
}

/** The position a resuming watcher has seen; 0 (nothing) for an id this service never sends. */
export function seenUpTo(lastEventId: string | undefined): number {
  return lastEventId === "1" || lastEventId === "2" || lastEventId === "3" ? Number(lastEventId) : 0;
}

/** Whether a watcher who has seen up to `seen` is to be sent a job in `status`. */
export function isNews(status: JobStatus, seen: number): boolean {
  return Number(eventIdOf(status)) > seen;
}

/** The longest wait for a job's end at creation (Prefer: wait=N). */
export const MAX_WAIT_SECONDS = 60;

export function checkWaitSeconds(seconds: number | undefined): number | undefined {
  if (seconds === undefined) return undefined;
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > MAX_WAIT_SECONDS) {
    throw badRequest("invalid_wait", `wait must be a whole number of seconds from 0 to ${MAX_WAIT_SECONDS} (got ${seconds})`);
  }
  return seconds;
}
