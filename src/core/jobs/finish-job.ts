import { chargesOnFinish, settleJob } from "../../domain/jobs/job-state-machine.js";
import type { Job } from "../../domain/jobs/job.js";
import { jobReleaseReason } from "../../domain/ledger/release-reasons.js";
import { TOPICS, type EventBus } from "../../ports/event-bus.js";
import type { JobFeed, JobSignal } from "../../ports/job-feed.js";
import { releaseHold, settleHold, type HoldPorts } from "../money/holds.js";

export interface JobFinished {
  readonly jobId: string;
}

export interface FinishPorts extends HoldPorts {
  readonly bus: EventBus;
  readonly feed: JobFeed;
}

/** Tells every process's watchers that a job's public state changed; a lost signal only delays them. */
export function signalChange(ports: Pick<FinishPorts, "feed" | "logger">, job: Pick<Job, "id" | "status">): void {
  const signal: JobSignal = { kind: "changed", jobId: job.id, status: job.status };
  ports.feed.publish(signal).catch((error: unknown) =>
    ports.logger.warn({ job_id: job.id, err: error }, `the ${job.status} signal was not sent; watchers see it on their next read`),
  );
}

/** Counts a job that has just reached its end; called once, by whoever moved it there (the worker, a cancel). */
export function observeEnd(ports: Pick<FinishPorts, "telemetry">, job: Job): void {
  const outcome = job.status === "done" ? "succeeded" : job.status === "failed" ? "failed" : "canceled";
  const generatingSeconds = job.startedAt && job.finishedAt ? (job.finishedAt.getTime() - job.startedAt.getTime()) / 1000 : undefined;
  ports.telemetry.observe({ kind: "job_finished", model: job.model, outcome, generatingSeconds });
}

/**
 * After a job's outcome is recorded (done, failed or canceled): move the
 * money, show the outcome, tell watchers, announce it (webhooks), and take
 * it off the reaper's list. Every step is idempotent, so whoever finds the
 * job finished and not finalized (the worker, a cancel, the reaper after a
 * crash) may repeat it. Returns the job as it now stands.
 */
export async function finishJob(ports: FinishPorts, job: Job): Promise<Job> {
  // What the ledger charged: less than asked when the balance could not cover usage beyond the hold.
  // A repeat (after a crash) answers the charge recorded then; without a record, what was asked was charged.
  let charged = job.charged;
  if (chargesOnFinish(job)) charged = (await settleHold(ports, job.accountId, job.id, job.charged, job.usage)) ?? job.charged;
  else await releaseHold(ports, job.accountId, job.id, jobReleaseReason(job));
  let shown = job;
  if (!job.settled) {
    shown = settleJob(job, charged);
    await ports.jobs.transition(shown, { status: job.status });
    signalChange(ports, shown);
  }
  await ports.bus.publish<JobFinished>(TOPICS.jobFinished, job.id, { jobId: job.id });
  await ports.jobs.markFinalized(job.id);
  return shown;
}
