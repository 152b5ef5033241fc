import { startJob } from "../../../domain/jobs/job-state-machine.js";
import type { Job } from "../../../domain/jobs/job.js";
import { FairQueue } from "../../../domain/scheduling/fair-queue.js";
import { TOPICS } from "../../../ports/event-bus.js";
import type { TraceContext } from "../../../ports/tracer.js";
import type { CoreDeps } from "../../core-deps.js";
import type { GenerationRequested } from "../../jobs/accept-job.js";
import { signalChange } from "../../jobs/finish-job.js";
import { leaseUntil, runJob, type RunOptions } from "./run-job.js";

/** Announced jobs a worker keeps waiting in memory; beyond it, the bus holds further announcements back. */
const MAX_WAITING = 10_000;

const secondsBetween = (from: Date, to: Date) => (to.getTime() - from.getTime()) / 1000;

export interface SlotOptions extends RunOptions {
  /** Jobs generated at once by this worker. */
  readonly concurrency: number;
}

/** A job this worker is generating, with the switches that abandon it (lease lost, or handed back at stop) and that cancel it (its owner asked). */
export interface RunningJob {
  readonly done: Promise<void>;
  readonly abandon: AbortController;
  readonly cancel: AbortController;
}

/**
 * A worker's slots: announced jobs wait here, taken round-robin between
 * accounts (one account's backlog cannot hold up another account's job),
 * are claimed (queued → processing, with a lease) while a slot is free, and
 * run. Announcements are acknowledged once a job waits here; a job left
 * waiting by a crash is still queued in the store, and the reaper announces
 * it again (at once after a restart of the embedded default).
 */
export class JobSlots {
  readonly running = new Map<string, RunningJob>();
  readonly waiting = new FairQueue();
  /** The trace each waiting job was announced in (a job's spans continue its acceptance's trace). */
  private readonly traces = new Map<string, TraceContext>();
  /** Announcements held back while `waiting` is full: the bus keeps them until there is room. */
  private readonly roomWaiters: (() => void)[] = [];
  /**
   * Claims under way: a job taken out of `waiting` is in neither `waiting`
   * nor `running` until its claim ends, so stop waits for them (a claimed
   * job then runs within the grace; one not claimed is announced again).
   */
  readonly claims = new Set<Promise<void>>();
  stopping = false;

  constructor(private readonly deps: CoreDeps, private readonly options: SlotOptions) {}

  /** Whether the job is running or waiting here. */
  has(jobId: string): boolean {
    return this.running.has(jobId) || this.waiting.has(jobId);
  }

  /** generation.requested: a queued job joins its account's line; slots are filled round-robin between accounts. */
  async handle(event: GenerationRequested): Promise<void> {
    if (this.stopping) throw new Error("worker is stopping");
    // Room first, then the read: an announcement held back holds no job in memory.
    while (this.waiting.size >= MAX_WAITING && !this.stopping) await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
    // Stopping may have begun while this waited for room: leave the event to another worker.
    if (this.stopping) throw new Error("worker is stopping");
    if (this.has(event.jobId)) return;
    const job = await this.deps.jobs.get(event.jobId);
    if (job?.status !== "queued" || this.has(job.id)) return;
    this.waiting.push(job.accountId, job.id);
    const trace = this.deps.tracer.capture();
    if (trace) this.traces.set(job.id, trace);
    this.pump();
  }

  /** Runs a job this worker now holds (claimed, or taken over), freeing its slot when it ends. */
  track(job: Job): void {
    const abandon = new AbortController();
    const cancel = new AbortController();
    const done = runJob(this.deps, this.options, job, abandon, cancel).finally(() => {
      this.running.delete(job.id);
      this.pump();
    });
    this.running.set(job.id, { done, abandon, cancel });
    void done.catch(() => {}); // failures leave the job to the reaper
  }

  /** Announces a job again for another worker (or the next start): this one will not run it. */
  handBack(jobId: string): Promise<void> {
    return this.deps.bus.publish<GenerationRequested>(TOPICS.generationRequested, jobId, { jobId });
  }

  /** Stops taking jobs: announcements waiting for room are let go (and refused). */
  stop(): void {
    this.stopping = true;
    this.roomWaiters.splice(0).forEach((wake) => wake());
  }

  /** Hands every job still waiting here back, so another worker (or the next start) takes it at once. */
  async handBackWaiting(): Promise<void> {
    await Promise.allSettled(this.waiting.drain().map((jobId) => this.handBack(jobId)));
    this.traces.clear();
  }

  private pump(): void {
    while (!this.stopping && this.running.size + this.claims.size < this.options.concurrency && this.waiting.size > 0) {
      const jobId = this.waiting.shift()!;
      this.roomWaiters.shift()?.();
      const trace = this.traces.get(jobId);
      this.traces.delete(jobId);
      // In the trace of the announcement that queued the job, not of whichever job's end woke this pump.
      const claiming: Promise<void> = this.deps.tracer.within(trace, () => this.claim(jobId))
        .catch(() => {}) // the job stays queued; the reaper announces it again
        .finally(() => {
          this.claims.delete(claiming);
          this.pump();
        });
      this.claims.add(claiming);
    }
  }

  private async claim(jobId: string): Promise<void> {
    const job = await this.deps.jobs.get(jobId);
    if (!job || job.status !== "queued") return;
    // Stopping began while the job was read: it left `waiting` and its announcement is consumed, so announce it again.
    if (this.stopping) return this.handBack(jobId);
    const claimed = startJob(job, this.deps.clock.now(), { owner: this.options.workerId, expiresAt: leaseUntil(this.deps, this.options) });
    if (await this.deps.jobs.transition(claimed, { status: "queued" })) {
      this.deps.telemetry.observe({ kind: "job_started", model: job.model, queuedSeconds: secondsBetween(job.createdAt, claimed.startedAt!) });
      this.track(claimed);
      signalChange(this.deps, claimed);
    }
  }
}
