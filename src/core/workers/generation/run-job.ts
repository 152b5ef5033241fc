import { findModel } from "../../../domain/catalog/models.js";
import { cancelJob, completeJob, failJob } from "../../../domain/jobs/job-state-machine.js";
import type { Job, JobResult, JobUsage } from "../../../domain/jobs/job.js";
import { chargeFor } from "../../../domain/pricing/quote-generation.js";
import { ProviderError, type GenerationOutput, type InputImage } from "../../../ports/provider.js";
import type { CoreDeps } from "../../core-deps.js";
import { finishJob, observeEnd } from "../../jobs/finish-job.js";

/** A job's input image that could not be had (fetched, or read from the blob store). */
export const MISSING_INPUT_IMAGES = "missing_input_images";

const EXTENSIONS: Record<string, string> = { "image/png": "png", "video/mp4": "mp4", "image/jpeg": "jpg" };

class JobTimeoutError extends Error {}
class LeaseLostError extends Error {}
class CanceledError extends Error {}

/** What a text generation reported so far: a canceled job is charged for it. */
interface Progress {
  usage: JobUsage;
}

/** What running a job needs to know of its worker. */
export interface RunOptions {
  /** Identifies this worker in job leases. */
  readonly workerId: string;
  /** How long a lease lasts without a heartbeat. */
  readonly leaseMs: number;
}

/** A lease taken or renewed now lasts until then. */
export const leaseUntil = (deps: CoreDeps, options: RunOptions) => new Date(deps.clock.now().getTime() + options.leaseMs);

/**
 * Runs a job this worker holds (in a span of the job's trace): generates it
 * within its budget, keeping its lease alive, then records the outcome and
 * finishes it (money, watchers, webhooks). `leaseLost` abandons it (another
 * worker took it over, or it is handed back at stop); `cancel` cancels it.
 */
export function runJob(deps: CoreDeps, options: RunOptions, job: Job, leaseLost: AbortController, cancel: AbortController): Promise<void> {
  return deps.tracer.span("job.generate", { "job.id": job.id, "job.model": job.model, "job.kind": job.kind }, () =>
    generateAndSettle(deps, options, job, leaseLost, cancel),
  );
}

async function generateAndSettle(deps: CoreDeps, options: RunOptions, job: Job, leaseLost: AbortController, cancel: AbortController): Promise<void> {
  const owner = options.workerId;
  const heartbeat = setInterval(() => {
    deps.jobs.renewLease(job.id, owner, leaseUntil(deps, options)).then(
      (kept) => kept || leaseLost.abort(),
      () => {}, // a failed renewal is retried on the next beat; the lease still has time
    );
  }, Math.max(50, Math.floor(options.leaseMs / 3)));
  let next: Job | undefined;
  const progress: Progress = { usage: { promptTokens: 0, textOutputTokens: 0, videoOutputTokens: 0 } };
  try {
    const output = await withinBudget(deps, job, (signal) => generate(deps, job, signal, progress), leaseLost.signal, cancel.signal);
    next = await completed(deps, job, output);
  } catch (error) {
    next = ended(deps, job, error, progress);
  } finally {
    clearInterval(heartbeat);
  }
  if (next) await settle(deps, next, owner);
}

/** The job done: its output stored, what it used charged. */
async function completed(deps: CoreDeps, job: Job, output: GenerationOutput): Promise<Job> {
  let result: JobResult = { text: output.text };
  if (output.media) {
    const blobKey = `outputs/${job.id}/output.${EXTENSIONS[output.media.mimeType] ?? "bin"}`;
    await deps.blobs.put(blobKey, output.media.bytes, output.media.mimeType);
    result = { ...result, blobKey, mimeType: output.media.mimeType };
  }
  const usage = job.kind === "text" || job.kind === "multimodal_realtime" ? output.usage : undefined;
  return completeJob(job, deps.clock.now(), result, chargeFor(job, output.usage), usage);
}

/** The job as a generation that threw leaves it: canceled or failed; undefined when its lease was lost (someone else finishes it). */
function ended(deps: CoreDeps, job: Job, error: unknown, progress: Progress): Job | undefined {
  if (error instanceof LeaseLostError) return undefined;
  if (error instanceof CanceledError) {
    // A text job is charged what the upstream reported before the abort; an image or video job produced nothing.
    const partial = job.kind === "text" || job.kind === "multimodal_realtime";
    return partial ? cancelJob(job, deps.clock.now(), chargeFor(job, progress.usage), progress.usage) : cancelJob(job, deps.clock.now());
  }
  const [code, message] =
    error instanceof ProviderError
      ? [error.code, error.message]
      : error instanceof JobTimeoutError
        ? ["timeout", error.message]
        : ["generation_failed", `generation failed: ${(error as Error).message}`];
  return failJob(job, deps.clock.now(), code, message);
}

/** Records the outcome if the job is still this worker's (a cancel or a takeover may have ended it), then finishes it. */
async function settle(deps: CoreDeps, next: Job, owner: string): Promise<void> {
  if (await deps.jobs.transition(next, { status: "processing", leaseOwner: owner })) {
    observeEnd(deps, next);
    await finishJob(deps, next);
  }
}

/** Runs the job's total budget from its start, so a takeover gets only what is left. */
async function withinBudget<T>(
  deps: CoreDeps, job: Job, work: (signal: AbortSignal) => Promise<T>, lease: AbortSignal, cancel: AbortSignal,
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

async function generate(deps: CoreDeps, job: Job, signal: AbortSignal, progress: Progress): Promise<GenerationOutput> {
  const model = findModel(job.model)!;
  const inputImages = await loadInputs(deps, job, signal);
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
    // A job records the three counts it is charged by (thinking is within textOutputTokens).
    const { promptTokens, textOutputTokens, videoOutputTokens } = chunk.usage;
    usage = { promptTokens, textOutputTokens, videoOutputTokens };
    progress.usage = usage;
  }
  // Refusals (blocked prompt, withheld output) are the provider's to recognise: it throws them for both surfaces alike.
  return { text, usage };
}

/** Inputs of a job, fetched and read within one byte budget (the spec's 200 MiB applies to all of them together). */
async function loadInputs(deps: CoreDeps, job: Job, signal: AbortSignal): Promise<InputImage[]> {
  const images: InputImage[] = [];
  let budget = deps.settingsOf.limits.maxInputBytes;
  const spend = (image: InputImage) => {
    budget -= image.bytes.length;
    if (budget < 0) throw new ProviderError("input_too_large", `the input images exceed ${deps.settingsOf.limits.maxInputBytes} bytes together`);
    images.push(image);
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

/**
 * Why an input image could not be fetched, as the job's error says it: the
 * message names the image by its 1-based position in input_images_urls,
 * never the URL (it may carry credentials), and gives only the reason the
 * fetcher marks as public: no address, port or system error.
 */
export function publicReason(error: unknown): string {
  const reason = (error as { publicReason?: unknown } | undefined)?.publicReason;
  return typeof reason === "string" ? reason : "the download failed";
}
