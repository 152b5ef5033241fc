import { findModel } from "../../domain/catalog/models.js";
import { cancelJob, completeJob, failJob, isTerminal, leaseExpired, startJob, takeOverJob } from "../../domain/jobs/job-state-machine.js";
import type { Job, JobResult, JobUsage } from "../../domain/jobs/job.js";
import { FairQueue } from "../../domain/scheduling/fair-queue.js";
import { chargeFor } from "../../domain/pricing/quote-generation.js";
import { TOPICS } from "../../ports/event-bus.js";
import { ProviderError, type GenerationOutput, type InputImage } from "../../ports/provider.js";
import type { CoreDeps } from "../core-deps.js";
import type { GenerationRequested } from "../jobs/accept-job.js";
import type { JobSignal } from "../../ports/job-feed.js";
import { abandonIntent, intentAbandoned } from "../money/holds.js";
import { finishJob, observeEnd, signalChange } from "../jobs/finish-job.js";
import type { TraceContext } from "../../ports/tracer.js";

export type { JobFinished } from "../jobs/finish-job.js";

export interface WorkerOptions {
  /** Identifies this worker in job leases. */
  readonly workerId: string;
  /** How long a lease lasts without a heartbeat; a dead worker's jobs are taken over after it. */
  readonly leaseMs: number;
  /** Jobs generated at once by this worker. */
  readonly concurrency: number;
  /** How often the reaper looks for abandoned work. */
  readonly reaperIntervalMs: number;
  /**
   * A queued job older than this is announced again (its first event may have
   * been lost), and an acceptance that left no job after this long is undone.
   */
  readonly requeueAfterMs: number;
  /** No synchronous text call lives longer: an older call's hold was left by a dead process and is released. */
  readonly textCallLimitMs: number;
}

export const MISSING_INPUT_IMAGES = "missing_input_images";

const EXTENSIONS: Record<string, string> = { "image/png": "png", "video/mp4": "mp4", "image/jpeg": "jpg" };

/** Announced jobs a worker keeps waiting in memory; beyond it, the bus holds further announcements back. */
const MAX_WAITING = 10_000;

const secondsBetween = (from: Date, to: Date) => (to.getTime() - from.getTime()) / 1000;

class JobTimeoutError extends Error {}
class LeaseLostError extends Error {}
class CanceledError extends Error {}

/** What a text generation reported so far: a canceled job is charged for it. */
interface Progress {
  usage: JobUsage;
}

/**
 * Generation: claims queued jobs (queued → processing, with a lease kept alive
 * by heartbeats), generates, then done | failed, settles or releases the
 * reservation and announces job.finished. Every step is a compare-and-set or
 * idempotent, so duplicated events, a crash at any point and a takeover by
 * another worker all end with the job finished once and charged once.
 */
export function createGenerationWorker(deps: CoreDeps, options: WorkerOptions) {
  /**
   * Jobs this worker is generating, with the switches that abandon one (lease
   * lost, or handed back at stop) and that cancel it (its owner asked).
   */
  const running = new Map<string, { done: Promise<void>; abandon: AbortController; cancel: AbortController }>();
  let stopping = false;
  let reaperTimer: NodeJS.Timeout | undefined;
  let reaping: Promise<void> | undefined;

  const leaseUntil = () => new Date(deps.clock.now().getTime() + options.leaseMs);

  /** Inputs of a job, fetched and read within one byte budget (the spec's 200 MiB applies to all of them together). */
  async function loadInputs(job: Job, signal: AbortSignal): Promise<InputImage[]> {
    const images: InputImage[] = [];
    let budget = deps.settingsOf.limits.maxInputBytes;
    const spend = (image: InputImage) => {
      budget -= image.bytes.length;
      if (budget < 0) throw new ProviderError("input_too_large", `the input images exceed ${deps.settingsOf.limits.maxInputBytes} bytes together`);
      images.push(image);
    };
    // The message names the image by its 1-based position in input_images_urls, never the URL (it may carry
    // credentials), and gives only the reason the fetcher marks as public: no address, port or system error.
    const publicReason = (error: unknown) => {
      const reason = (error as { publicReason?: unknown } | undefined)?.publicReason;
      return typeof reason === "string" ? reason : "the download failed";
    };
    for (const [index, url] of job.input.inputImageUrls.entries()) {
      let image: InputImage;
      try {
        image = await deps.inputs.fetch(url, signal, Math.max(0, budget));
      } catch (error) {
        if (signal.aborted) throw error;
        throw new ProviderError(MISSING_INPUT_IMAGES, `input image ${index + 1} could not be fetched: ${publicReason(error)}`);
      }
      spend(image);
    }
    for (const key of job.input.inputBlobKeys) {
      const blob = await deps.blobs.read(key);
      if (!blob) throw new ProviderError(MISSING_INPUT_IMAGES, `stored input image ${key} is missing`);
      spend({ bytes: blob.bytes, mimeType: blob.contentType });
    }
    return images;
  }

  async function generate(job: Job, signal: AbortSignal, progress: Progress): Promise<GenerationOutput> {
    const model = findModel(job.model)!;
    const inputImages = await loadInputs(job, signal);
    const media = { ...job.input, model, inputImages };
    if (model.kind === "image") return deps.provider.generateImage(media, signal);
    if (model.kind === "video") return deps.provider.generateVideo(media, signal);
    let text = "";
    let usage = { promptTokens: 0, textOutputTokens: 0, videoOutputTokens: 0 };
    const request = {
      model, route: job.input.route, promptText: job.input.prompt, maxOutputTokens: job.input.maxOutputTokens ?? model.maxOutputTokens!, inputImages,
    };
    for await (const chunk of deps.provider.streamText(request, signal)) {
      text += chunk.text;
      usage = chunk.usage;
      progress.usage = usage;
    }
    // Refusals (blocked prompt, withheld output) are the provider's to recognise: it throws them for both surfaces alike.
    return { text, usage };
  }

  /** After the outcome is recorded: money, the shown state, watchers, webhooks (see finishJob). */
  const finalize = (job: Job) => finishJob(deps, job);

  /** Runs the job's total budget from its start, so a takeover gets only what is left. */
  async function withinBudget<T>(
    job: Job, work: (signal: AbortSignal) => Promise<T>, lease: AbortSignal, cancel: AbortSignal,
  ): Promise<T> {
    const elapsed = deps.clock.now().getTime() - (job.startedAt ?? job.createdAt).getTime();
    const remainingMs = Math.max(0, job.timeoutSeconds * 1000 - elapsed);
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const stop = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort(new JobTimeoutError());
        reject(new JobTimeoutError(`the job did not finish within its ${job.timeoutSeconds}-second timeout`));
      }, remainingMs);
      lease.addEventListener("abort", () => {
        controller.abort(new LeaseLostError());
        reject(new LeaseLostError("the job's lease was taken over"));
      });
      const canceled = () => {
        controller.abort(new CanceledError());
        reject(new CanceledError("the job was canceled"));
      };
      if (cancel.aborted) canceled();
      else cancel.addEventListener("abort", canceled);
    });
    try {
      return await Promise.race([work(controller.signal), stop]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Generates a job this worker holds (in a span of the job's trace), keeping its lease alive, and finishes it. */
  function run(job: Job, leaseLost: AbortController, cancel: AbortController): Promise<void> {
    return deps.tracer.span("job.generate", { "job.id": job.id, "job.model": job.model, "job.kind": job.kind }, () => generateAndSettle(job, leaseLost, cancel));
  }

  async function generateAndSettle(job: Job, leaseLost: AbortController, cancel: AbortController): Promise<void> {
    const owner = options.workerId;
    const heartbeat = setInterval(() => {
      deps.jobs.renewLease(job.id, owner, leaseUntil()).then(
        (kept) => kept || leaseLost.abort(),
        () => {}, // a failed renewal is retried on the next beat; the lease still has time
      );
    }, Math.max(50, Math.floor(options.leaseMs / 3)));
    let next: Job;
    const progress: Progress = { usage: { promptTokens: 0, textOutputTokens: 0, videoOutputTokens: 0 } };
    try {
      const output = await withinBudget(job, (signal) => generate(job, signal, progress), leaseLost.signal, cancel.signal);
      let result: JobResult = { text: output.text };
      if (output.media) {
        const blobKey = `outputs/${job.id}/output.${EXTENSIONS[output.media.mimeType] ?? "bin"}`;
        await deps.blobs.put(blobKey, output.media.bytes, output.media.mimeType);
        result = { ...result, blobKey, mimeType: output.media.mimeType };
      }
      const usage = job.kind === "text" || job.kind === "multimodal_realtime" ? output.usage : undefined;
      next = completeJob(job, deps.clock.now(), result, chargeFor(job, output.usage), usage);
    } catch (error) {
      if (error instanceof LeaseLostError) return; // someone else finishes it
      if (error instanceof CanceledError) {
        // A text job is charged what the upstream reported before the abort; an image or video job produced nothing.
        const partial = job.kind === "text" || job.kind === "multimodal_realtime";
        next = partial
          ? cancelJob(job, deps.clock.now(), chargeFor(job, progress.usage), progress.usage)
          : cancelJob(job, deps.clock.now());
      } else {
        const [code, message] =
          error instanceof ProviderError
            ? [error.code, error.message]
            : error instanceof JobTimeoutError
              ? ["timeout", error.message]
              : ["generation_failed", `generation failed: ${(error as Error).message}`];
        next = failJob(job, deps.clock.now(), code, message);
      }
    } finally {
      clearInterval(heartbeat);
    }
    return settle(next, owner);
  }

  /** Records the outcome if the job is still this worker's (a cancel or a takeover may have ended it), then finishes it. */
  async function settle(next: Job, owner: string): Promise<void> {
    if (await deps.jobs.transition(next, { status: "processing", leaseOwner: owner })) {
      observeEnd(deps, next);
      await finalize(next);
    }
  }

  /**
   * Queued jobs announced to this worker, waiting for a slot, taken
   * round-robin between accounts: one account's backlog cannot hold up
   * another account's job. Announcements are acknowledged once a job waits
   * here; a job left waiting by a crash is still queued in the store, and the
   * reaper announces it again (at once after a restart of the embedded default).
   */
  const waiting = new FairQueue();
  /** The trace each waiting job was announced in (a job's spans continue its acceptance's trace). */
  const traces = new Map<string, TraceContext>();
  /** Announcements held back while `waiting` is full: the bus keeps them until there is room. */
  const roomWaiters: (() => void)[] = [];
  /**
   * Claims under way: a job taken out of `waiting` is in neither `waiting`
   * nor `running` until its claim ends, so stop() waits for them (a claimed
   * job then runs within the grace; one not claimed is announced again).
   */
  const claims = new Set<Promise<void>>();

  /** Announces a job again for another worker (or the next start): this one will not run it. */
  const handBack = (jobId: string) => deps.bus.publish<GenerationRequested>(TOPICS.generationRequested, jobId, { jobId });

  function pump(): void {
    while (!stopping && running.size + claims.size < options.concurrency && waiting.size > 0) {
      const jobId = waiting.shift()!;
      roomWaiters.shift()?.();
      const trace = traces.get(jobId);
      traces.delete(jobId);
      // In the trace of the announcement that queued the job, not of whichever job's end woke this pump.
      const claiming: Promise<void> = deps.tracer.within(trace, () => claim(jobId))
        .catch(() => {}) // the job stays queued; the reaper announces it again
        .finally(() => {
          claims.delete(claiming);
          pump();
        });
      claims.add(claiming);
    }
  }

  async function claim(jobId: string): Promise<void> {
    const job = await deps.jobs.get(jobId);
    if (!job || job.status !== "queued") return;
    // Stopping began while the job was read: it left `waiting` and its announcement is consumed, so announce it again.
    if (stopping) return handBack(jobId);
    const claimed = startJob(job, deps.clock.now(), { owner: options.workerId, expiresAt: leaseUntil() });
    if (await deps.jobs.transition(claimed, { status: "queued" })) {
      deps.telemetry.observe({ kind: "job_started", model: job.model, queuedSeconds: secondsBetween(job.createdAt, claimed.startedAt!) });
      track(claimed);
      signalChange(deps, claimed);
    }
  }

  function track(job: Job): void {
    const abandon = new AbortController();
    const cancel = new AbortController();
    const done = run(job, abandon, cancel).finally(() => {
      running.delete(job.id);
      pump();
    });
    running.set(job.id, { done, abandon, cancel });
    void done.catch(() => {}); // failures leave the job to the reaper
  }

  /** generation.requested: a queued job joins its account's line; slots are filled round-robin between accounts. */
  async function handle(event: GenerationRequested): Promise<void> {
    if (stopping) throw new Error("worker is stopping");
    // Room first, then the read: an announcement held back holds no job in memory.
    while (waiting.size >= MAX_WAITING && !stopping) await new Promise<void>((resolve) => roomWaiters.push(resolve));
    // Stopping may have begun while this waited for room: leave the event to another worker.
    if (stopping) throw new Error("worker is stopping");
    if (running.has(event.jobId) || waiting.has(event.jobId)) return;
    const job = await deps.jobs.get(event.jobId);
    if (job?.status !== "queued" || running.has(job.id) || waiting.has(job.id)) return;
    waiting.push(job.accountId, job.id);
    const trace = deps.tracer.capture();
    if (trace) traces.set(job.id, trace);
    pump();
  }

  /** What the reaper's scan has seen since it last started over: the queue's depth and age, and the settlement backlog. */
  const scan = {
    queued: 0,
    oldestQueued: undefined as Date | undefined,
    unsettled: 0,
    count(entries: readonly { job?: Job }[], now: Date) {
      for (const { job } of entries) {
        if (job?.status === "queued") {
          this.queued++;
          if (!this.oldestQueued || job.createdAt < this.oldestQueued) this.oldestQueued = job.createdAt;
        } else if (job && isTerminal(job.status)) {
          this.unsettled++;
        }
      }
      this.now = now;
    },
    now: undefined as Date | undefined,
    report() {
      const oldestQueuedSeconds = this.oldestQueued && this.now ? Math.max(0, secondsBetween(this.oldestQueued, this.now)) : 0;
      deps.telemetry.observe({ kind: "queue_scanned", queued: this.queued, oldestQueuedSeconds, unsettled: this.unsettled });
      this.queued = 0;
      this.oldestQueued = undefined;
      this.unsettled = 0;
    },
  };

  /** Where the reaper's scan continues: each pass takes the next page, so a large backlog is covered in turn. */
  let cursor: string | undefined;
  /** When this worker last re-announced a queued job, so the re-announcements stay one per interval. */
  const announced = new Map<string, number>();

  /** With a store of its own, whatever was left unfinished before this process started belongs to a dead process. */
  const ownsSince = deps.settingsOf.ownsStoreSince;
  const deadBefore = (since: Date) => ownsSince !== undefined && since.getTime() < ownsSince.getTime();
  const abandoned = (job: Job, now: Date) =>
    leaseExpired(job, now) || (ownsSince !== undefined && job.status === "processing" && job.leaseOwner !== options.workerId);

  /** One pass over a page of unfinished jobs: finish what a crash interrupted. */
  async function reap(): Promise<void> {
    const now = deps.clock.now();
    if (announced.size > 10_000) announced.clear(); // bounded memory; at worst a job is announced once more
    const page = await deps.jobs.listUnfinished(500, cursor);
    cursor = page.next;
    scan.count(page.entries, now);
    if (!page.next) scan.report();
    for (const { jobId, accountId, since, job } of page.entries) {
      if (stopping) return;
      if (running.has(jobId) || waiting.has(jobId)) continue;
      const age = now.getTime() - since.getTime();
      if (!job) {
        // An acceptance (or a synchronous text call) died holding money and left no job: give the money back.
        if (intentAbandoned(jobId, age, options) || deadBefore(since)) await abandonIntent(deps, accountId, jobId);
      } else if (isTerminal(job.status)) {
        await finalize(job);
      } else if (abandoned(job, now) && running.size < options.concurrency) {
        const taken = takeOverJob(job, { owner: options.workerId, expiresAt: leaseUntil() });
        if (await deps.jobs.transition(taken, { status: "processing", leaseOwner: job.leaseOwner })) {
          deps.telemetry.observe({ kind: "job_taken_over" });
          track(taken);
        }
      } else if (job.status === "queued" && (age > options.requeueAfterMs || deadBefore(since))) {
        if (now.getTime() - (announced.get(job.id) ?? 0) > options.requeueAfterMs) {
          announced.set(job.id, now.getTime());
          await deps.bus.publish<GenerationRequested>(TOPICS.generationRequested, job.id, { jobId: job.id });
          deps.telemetry.observe({ kind: "job_reannounced" });
        }
      }
    }
  }

  /** A cancel of a job this worker is generating aborts it (the provider call, the simulator) at once. */
  function onSignal(signal: JobSignal): void {
    if (signal.kind === "cancel") running.get(signal.jobId)?.cancel.abort();
  }
  let stopListening: (() => void) | undefined;

  return {
    handle,
    reap,
    /** Hears cancels from every process (the job feed). */
    listen() {
      stopListening ??= deps.feed.listen(onSignal);
    },
    /** Reaps at once (a restart resumes its predecessor's work without waiting), then every interval. */
    startReaper(onError: (error: unknown) => void) {
      const pass = () => {
        if (reaping || stopping) return;
        reaping = reap().catch(onError).finally(() => (reaping = undefined));
      };
      reaperTimer = setInterval(pass, options.reaperIntervalMs);
      pass();
    },
    /**
     * Graceful stop: take no more jobs, give in-flight ones `graceMs` to finish,
     * then hand the rest back by letting their leases lapse at once.
     */
    async stop(graceMs: number): Promise<void> {
      stopping = true;
      stopListening?.();
      clearInterval(reaperTimer);
      roomWaiters.splice(0).forEach((wake) => wake());
      await reaping;
      // Everything below shares the grace: a store that hangs cannot hold the stop up longer.
      const deadline = Date.now() + graceMs;
      const withinGrace = async (work: Promise<unknown>) => {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([work, new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))))]);
        clearTimeout(timer);
      };
      // Claims under way end first: a job claimed joins `running` (and gets the grace), one not claimed is announced again.
      await withinGrace(Promise.allSettled([...claims]));
      // Jobs still waiting here are announced again, so another worker (or the next start) takes them at once.
      await Promise.allSettled(waiting.drain().map(handBack));
      traces.clear();
      await withinGrace(Promise.allSettled([...running.values()].map((r) => r.done)));
      const now = deps.clock.now();
      for (const { abandon } of running.values()) abandon.abort();
      await Promise.allSettled([...running.keys()].map((id) => deps.jobs.renewLease(id, options.workerId, now)));
    },
  };
}
