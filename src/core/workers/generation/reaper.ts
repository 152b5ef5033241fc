import { isTerminal, leaseExpired, takeOverJob } from "../../../domain/jobs/job-state-machine.js";
import type { Job } from "../../../domain/jobs/job.js";
import { TOPICS } from "../../../ports/event-bus.js";
import type { CoreDeps } from "../../core-deps.js";
import type { GenerationRequested } from "../../jobs/accept-job.js";
import { finishJob } from "../../jobs/finish-job.js";
import { abandonIntent, intentAbandoned } from "../../money/holds.js";
import type { JobSlots, SlotOptions } from "./job-slots.js";
import { leaseUntil } from "./run-job.js";

export interface ReaperOptions extends SlotOptions {
  /**
   * A queued job older than this is announced again (its first event may have
   * been lost), and an acceptance that left no job after this long is undone.
   */
  readonly requeueAfterMs: number;
  /** No synchronous text call lives longer: an older call's hold was left by a dead process and is released. */
  readonly textCallLimitMs: number;
}

const secondsBetween = (from: Date, to: Date) => (to.getTime() - from.getTime()) / 1000;

/** What the reaper's scan has seen since it last started over: the queue's depth and age, and the settlement backlog. */
class ScanTally {
  private queued = 0;
  private oldestQueued: Date | undefined;
  private unsettled = 0;
  private now: Date | undefined;

  count(entries: readonly { job?: Job }[], now: Date): void {
    for (const { job } of entries) {
      if (job?.status === "queued") {
        this.queued++;
        if (!this.oldestQueued || job.createdAt < this.oldestQueued) this.oldestQueued = job.createdAt;
      } else if (job && isTerminal(job.status)) {
        this.unsettled++;
      }
    }
    this.now = now;
  }

  report(deps: CoreDeps): void {
    const oldestQueuedSeconds = this.oldestQueued && this.now ? Math.max(0, secondsBetween(this.oldestQueued, this.now)) : 0;
    deps.telemetry.observe({ kind: "queue_scanned", queued: this.queued, oldestQueuedSeconds, unsettled: this.unsettled });
    this.queued = 0;
    this.oldestQueued = undefined;
    this.unsettled = 0;
  }
}

/**
 * The reaper: passes over the unfinished jobs a page at a time and finishes
 * what a crash interrupted. An intent that left no job has its hold given
 * back; a finished job not yet settled is settled; a job whose lease lapsed
 * is taken over; a queued job nobody claimed is announced again.
 */
export class Reaper {
  private readonly scan = new ScanTally();
  /** Where the scan continues: each pass takes the next page, so a large backlog is covered in turn. */
  private cursor: string | undefined;
  /** When this worker last re-announced a queued job, so the re-announcements stay one per interval. */
  private readonly announced = new Map<string, number>();
  /** With a store of its own, whatever was left unfinished before this process started belongs to a dead process. */
  private readonly ownsSince: Date | undefined;

  constructor(private readonly deps: CoreDeps, private readonly options: ReaperOptions, private readonly slots: JobSlots) {
    this.ownsSince = deps.settingsOf.ownsStoreSince;
  }

  /** One pass over a page of unfinished jobs. */
  async reap(): Promise<void> {
    const now = this.deps.clock.now();
    if (this.announced.size > 10_000) this.announced.clear(); // bounded memory; at worst a job is announced once more
    const page = await this.deps.jobs.listUnfinished(500, this.cursor);
    this.cursor = page.next;
    this.scan.count(page.entries, now);
    if (!page.next) this.scan.report(this.deps);
    for (const { jobId, accountId, since, job } of page.entries) {
      if (this.slots.stopping) return;
      if (this.slots.has(jobId)) continue;
      const age = now.getTime() - since.getTime();
      if (!job) {
        // An acceptance (or a synchronous text call) died holding money and left no job: give the money back.
        if (intentAbandoned(jobId, age, this.options) || this.deadBefore(since)) await abandonIntent(this.deps, accountId, jobId);
      } else if (isTerminal(job.status)) {
        await finishJob(this.deps, job);
      } else if (this.abandoned(job, now) && this.slots.running.size < this.options.concurrency) {
        await this.takeOver(job);
      } else if (job.status === "queued" && (age > this.options.requeueAfterMs || this.deadBefore(since))) {
        await this.announceAgain(job, now);
      }
    }
  }

  private deadBefore(since: Date): boolean {
    return this.ownsSince !== undefined && since.getTime() < this.ownsSince.getTime();
  }

  private abandoned(job: Job, now: Date): boolean {
    return leaseExpired(job, now) || (this.ownsSince !== undefined && job.status === "processing" && job.leaseOwner !== this.options.workerId);
  }

  private async takeOver(job: Job): Promise<void> {
    const taken = takeOverJob(job, { owner: this.options.workerId, expiresAt: leaseUntil(this.deps, this.options) });
    if (await this.deps.jobs.transition(taken, { status: "processing", leaseOwner: job.leaseOwner })) {
      this.deps.telemetry.observe({ kind: "job_taken_over" });
      this.slots.track(taken);
    }
  }

  private async announceAgain(job: Job, now: Date): Promise<void> {
    if (now.getTime() - (this.announced.get(job.id) ?? 0) <= this.options.requeueAfterMs) return;
    this.announced.set(job.id, now.getTime());
    await this.deps.bus.publish<GenerationRequested>(TOPICS.generationRequested, job.id, { jobId: job.id });
    this.deps.telemetry.observe({ kind: "job_reannounced" });
  }
}
