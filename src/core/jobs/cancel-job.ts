import { cancelJob, isTerminal, type CancelReason } from "../../domain/jobs/job-state-machine.js";
import type { Job } from "../../domain/jobs/job.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import { CLIENT_GONE_ERROR } from "../../domain/ledger/release-reasons.js";
import type { Clock } from "../../ports/clock.js";
import type { JobStore } from "../../ports/job-store.js";
import { finishJob, observeEnd, type FinishPorts } from "./finish-job.js";
import { followJob } from "./follow-job.js";

export interface CancelPorts extends FinishPorts {
  readonly jobs: JobStore;
  readonly clock: Clock;
}

export interface CancelOptions {
  /**
   * How long a cancel of a processing job waits for the worker generating it
   * to abort and record what was produced; past it (the worker is gone or
   * unreachable) the cancel ends the job itself, charging nothing.
   */
  readonly workerGraceMs: number;
}

const finished = (job: Job) =>
  new DomainError("already_finished", "job_already_finished", `job ${job.id} already finished: it is ${job.status}`, { status: job.status });

/**
 * Cancels a job of the caller's (the caller's account was checked by whoever
 * read `jobId`). Every step is a compare-and-set on the job, so a cancel
 * racing the job's end, another cancel, or a takeover leaves exactly one
 * terminal state, and finishJob moves its money once:
 * - queued: canceled here, the hold released;
 * - processing: the worker generating it is told (the feed) and aborts,
 *   recording what the upstream produced; if it has not within the grace,
 *   the job is canceled here, charging nothing (the worker's own outcome
 *   then fails its compare-and-set);
 * - canceled already: answered again (idempotent), finished if a crash left
 *   it unsettled; done or failed: refused, 409 job_already_finished.
 */
export async function cancelOwnJob(ports: CancelPorts, jobId: string, options: CancelOptions, abort?: AbortSignal): Promise<Job> {
  const follow = followJob(ports.feed, jobId);
  try {
    /** Until when the worker may answer the cancel signal; set when the signal is sent. */
    let workerDeadline: number | undefined;
    for (;;) {
      const job = await ports.jobs.get(jobId);
      if (!job) throw new DomainError("not_found", "job_not_found", `no job ${jobId}`);
      if (isTerminal(job.status)) {
        if (job.status !== "canceled") {
          // Its outcome is recorded: let its money move first, so the refusal and the balance agree.
          if (!job.settled) await finishJob(ports, job);
          throw finished(job);
        }
        return job.settled ? job : finishJob(ports, job);
      }
      if (job.status === "queued") {
        const canceled = cancelJob(job, ports.clock.now());
        if (await ports.jobs.transition(canceled, { status: "queued" })) {
          observeEnd(ports, canceled);
          return finishJob(ports, canceled);
        }
        continue; // claimed (or canceled) meanwhile: look again
      }
      // Processing.
      if (workerDeadline === undefined) {
        workerDeadline = Date.now() + options.workerGraceMs;
        await ports.feed.publish({ kind: "cancel", jobId }, abort).catch((error: unknown) => {
          ports.logger.warn({ job_id: jobId, err: error }, "the cancel signal was not sent; canceling without the worker");
          workerDeadline = 0;
        });
      }
      const left = workerDeadline - Date.now();
      if (left > 0) {
        await follow.next(Math.min(left, 1000), abort);
        if (abort?.aborted) throw abort.reason;
        continue;
      }
      const canceled = cancelJob(job, ports.clock.now());
      if (await ports.jobs.transition(canceled, { status: "processing", leaseOwner: job.leaseOwner })) {
        observeEnd(ports, canceled);
        return finishJob(ports, canceled);
      }
    }
  } finally {
    follow.close();
  }
}

/** Spec §7 rule 2: a creation whose 202 never reached its client is not billed. */
export const CLIENT_GONE: CancelReason = {
  error: CLIENT_GONE_ERROR,
  message: "the client went away before this job's acceptance was answered; nothing was charged",
};

/**
 * Cancels a job whose acceptance could not be answered (the client went away
 * first, and it sent no Idempotency-Key to find it by): canceled and its hold
 * released whether it is queued or already being generated, charging nothing.
 * The cancel is written first and the worker told after, so a worker's own
 * outcome (and any charge for what it produced) fails its compare-and-set.
 * A job already finished is left as it is. Safe to repeat.
 */
export async function cancelUnanswered(ports: CancelPorts, jobId: string): Promise<Job | undefined> {
  for (;;) {
    const job = await ports.jobs.get(jobId);
    if (!job) return undefined;
    if (isTerminal(job.status)) return job.status === "canceled" && !job.settled ? finishJob(ports, job) : job;
    const canceled = cancelJob(job, ports.clock.now(), 0n, undefined, CLIENT_GONE);
    const expected = job.status === "queued" ? { status: job.status } : { status: job.status, leaseOwner: job.leaseOwner };
    if (!(await ports.jobs.transition(canceled, expected))) continue; // claimed or finished meanwhile: look again
    observeEnd(ports, canceled);
    if (job.status === "processing") {
      await ports.feed.publish({ kind: "cancel", jobId }).catch((error: unknown) =>
        ports.logger.warn({ job_id: jobId, err: error }, "the cancel signal was not sent; the worker's outcome fails its compare-and-set"),
      );
    }
    return finishJob(ports, canceled);
  }
}
