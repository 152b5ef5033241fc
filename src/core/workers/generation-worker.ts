import type { CoreDeps } from "../core-deps.js";
import type { JobSignal } from "../../ports/job-feed.js";
import type { GenerationRequested } from "../jobs/accept-job.js";
import { JobSlots } from "./generation/job-slots.js";
import { Reaper, type ReaperOptions } from "./generation/reaper.js";

export type { JobFinished } from "../jobs/finish-job.js";
export { MISSING_INPUT_IMAGES } from "./generation/run-job.js";

export interface WorkerOptions extends ReaperOptions {
  /** Identifies this worker in job leases. */
  readonly workerId: string;
  /** How long a lease lasts without a heartbeat; a dead worker's jobs are taken over after it. */
  readonly leaseMs: number;
  /** Jobs generated at once by this worker. */
  readonly concurrency: number;
  /** How often the reaper looks for abandoned work. */
  readonly reaperIntervalMs: number;
}

/**
 * Generation: claims queued jobs (queued → processing, with a lease kept alive
 * by heartbeats), generates, then done | failed, settles or releases the
 * reservation and announces job.finished. Every step is a compare-and-set or
 * idempotent, so duplicated events, a crash at any point and a takeover by
 * another worker all end with the job finished once and charged once.
 * The units: the slots (generation/job-slots.ts: waiting, claiming, running),
 * a job's run (generation/run-job.ts) and the reaper (generation/reaper.ts).
 */
export function createGenerationWorker(deps: CoreDeps, options: WorkerOptions) {
  const slots = new JobSlots(deps, options);
  const reaper = new Reaper(deps, options, slots);
  let reaperTimer: NodeJS.Timeout | undefined;
  let reaping: Promise<void> | undefined;
  let stopListening: (() => void) | undefined;

  /** A cancel of a job this worker is generating aborts it (the provider call, the simulator) at once. */
  const onSignal = (signal: JobSignal) => {
    if (signal.kind === "cancel") slots.running.get(signal.jobId)?.cancel.abort();
  };

  return {
    handle: (event: GenerationRequested) => slots.handle(event),
    reap: () => reaper.reap(),
    /** Hears cancels from every process (the job feed). */
    listen() {
      stopListening ??= deps.feed.listen(onSignal);
    },
    /** Reaps at once (a restart resumes its predecessor's work without waiting), then every interval. */
    startReaper(onError: (error: unknown) => void) {
      const pass = () => {
        if (reaping || slots.stopping) return;
        reaping = reaper.reap().catch(onError).finally(() => (reaping = undefined));
      };
      reaperTimer = setInterval(pass, options.reaperIntervalMs);
      pass();
    },
    /**
     * Graceful stop: take no more jobs, give in-flight ones `graceMs` to finish,
     * then hand the rest back by letting their leases lapse at once.
     */
    async stop(graceMs: number): Promise<void> {
      slots.stop();
      stopListening?.();
      clearInterval(reaperTimer);
      await reaping;
      // Everything below shares the grace: a store that hangs cannot hold the stop up longer.
      const deadline = Date.now() + graceMs;
      const withinGrace = async (work: Promise<unknown>) => {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([work, new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))))]);
        clearTimeout(timer);
      };
      // Claims under way end first: a job claimed joins `running` (and gets the grace), one not claimed is announced again.
      await withinGrace(Promise.allSettled([...slots.claims]));
      // Jobs still waiting here are announced again, so another worker (or the next start) takes them at once.
      await slots.handBackWaiting();
      await withinGrace(Promise.allSettled([...slots.running.values()].map((r) => r.done)));
      const now = deps.clock.now();
      for (const { abandon } of slots.running.values()) abandon.abort();
      await Promise.allSettled([...slots.running.keys()].map((id) => deps.jobs.renewLease(id, options.workerId, now)));
    },
  };
}
