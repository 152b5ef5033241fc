import { isNews, eventIdOf } from "../../domain/jobs/job-events.js";
import { isTerminal, publicState } from "../../domain/jobs/job-state-machine.js";
import type { Job } from "../../domain/jobs/job.js";
import type { JobFeed } from "../../ports/job-feed.js";
import type { JobStore } from "../../ports/job-store.js";
import { followJob } from "./follow-job.js";
import { DomainError } from "../../domain/errors/domain-error.js";

export interface WatchPorts {
  readonly jobs: JobStore;
  readonly feed: JobFeed;
}

export interface WatchOptions {
  /**
   * How long a watcher trusts the feed alone: past this without a signal it
   * reads the job anyway (a signal may have been lost). Not a polling loop:
   * seconds apart, and any signal resets it.
   */
  readonly fallbackMs: number;
}

export interface JobEvent {
  readonly eventId: string;
  readonly job: Job;
}

/**
 * The public states of one of the account's jobs, each once and in order,
 * from the first one after `seen` (see job-events.ts), ending after the
 * terminal one or when `abort` fires. The job is read when watching starts
 * and again whenever the feed says it changed (a change made by any
 * process). Unknown jobs and other accounts' jobs fail, 404, before anything
 * is sent.
 */
export async function* watchJob(
  ports: WatchPorts, accountId: string, jobId: string, seen: number, options: WatchOptions, abort?: AbortSignal,
): AsyncGenerator<JobEvent> {
  // Listening starts before the first read, so a change between the two is not missed.
  const follow = followJob(ports.feed, jobId);
  try {
    let job = await ports.jobs.get(jobId);
    if (!job || job.accountId !== accountId) throw new DomainError("not_found", "job_not_found", `no job ${jobId}`);
    while (job && !abort?.aborted) {
      const shown = publicState(job);
      if (isNews(shown.status, seen)) {
        seen = Number(eventIdOf(shown.status));
        yield { eventId: eventIdOf(shown.status), job };
      }
      if (isTerminal(shown.status)) return;
      await follow.next(options.fallbackMs, abort);
      if (abort?.aborted) return;
      // A job removed meanwhile (retention) ends the watch.
      job = await ports.jobs.get(jobId);
    }
  } finally {
    follow.close();
  }
}

/** Waits up to `ms` for the job to finish (Prefer: wait): the finished job, or undefined when time ran out first. */
export async function waitForEnd(ports: WatchPorts, accountId: string, jobId: string, ms: number, abort?: AbortSignal): Promise<Job | undefined> {
  const timeUp = AbortSignal.timeout(Math.max(0, ms));
  const either = abort ? AbortSignal.any([abort, timeUp]) : timeUp;
  for await (const { job } of watchJob(ports, accountId, jobId, 0, { fallbackMs: Math.min(ms, 5_000) }, either)) {
    if (isTerminal(publicState(job).status)) return job;
  }
  return undefined;
}
