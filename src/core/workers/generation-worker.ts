import { findModel } from "../../domain/catalog/models.js";
import { completeJob, failJob, startJob } from "../../domain/jobs/job-state-machine.js";
import type { Job, JobResult } from "../../domain/jobs/job.js";
import { imagePrice, tokenCost, videoPrice } from "../../domain/pricing/quotes.js";
import { TOPICS } from "../../ports/event-bus.js";
import { ProviderError, type GenerationOutput, type InputImage } from "../../ports/provider.js";
import type { CoreDeps } from "../core-deps.js";
import type { GenerationRequested } from "../jobs/accept-job.js";

export interface JobFinished {
  readonly jobId: string;
}

export const MISSING_INPUT_IMAGES = "missing_input_images";

const EXTENSIONS: Record<string, string> = { "image/png": "png", "video/mp4": "mp4", "image/jpeg": "jpg" };

class JobTimeoutError extends Error {}

/** Runs `work` under the job's total budget (spec: `timeout` bounds the job's execution). */
async function withinBudget<T>(seconds: number, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const expiry = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort(new JobTimeoutError());
      reject(new JobTimeoutError(`the job did not finish within its ${seconds}-second timeout`));
    }, seconds * 1000);
  });
  try {
    return await Promise.race([work(controller.signal), expiry]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Consumes generation.requested: queued → processing → done | failed, then
 * settles or releases the reservation and announces job.finished. Every step
 * is a compare-and-set on the job's status, so a duplicated event does nothing.
 */
export function createGenerationWorker(deps: CoreDeps) {
  async function loadInputs(job: Job, signal: AbortSignal): Promise<InputImage[]> {
    const images: InputImage[] = [];
    for (const url of job.input.inputImageUrls) {
      try {
        images.push(await deps.inputs.fetch(url, signal));
      } catch (error) {
        if (signal.aborted) throw error;
        throw new ProviderError(MISSING_INPUT_IMAGES, `input image ${url} could not be fetched: ${(error as Error).message}`);
      }
    }
    for (const key of job.input.inputBlobKeys) {
      const blob = await deps.blobs.read(key);
      if (!blob) throw new ProviderError(MISSING_INPUT_IMAGES, `stored input image ${key} is missing`);
      images.push({ bytes: blob.bytes, mimeType: blob.contentType });
    }
    return images;
  }

  async function generate(job: Job, signal: AbortSignal): Promise<GenerationOutput> {
    const model = findModel(job.model)!;
    const inputImages = await loadInputs(job, signal);
    const media = { ...job.input, model, inputImages };
    if (model.kind === "image") return deps.provider.generateImage(media, signal);
    if (model.kind === "video") return deps.provider.generateVideo(media, signal);
    let text = "";
    let usage = { promptTokens: 0, textOutputTokens: 0, videoOutputTokens: 0 };
    const request = { model, promptText: job.input.prompt, maxOutputTokens: job.input.maxOutputTokens ?? model.maxOutputTokens!, inputImages };
    for await (const chunk of deps.provider.streamText(request, signal)) {
      text += chunk.text;
      usage = chunk.usage;
    }
    return { text, usage };
  }

  /** Image and video are charged their reserved price; text what it used, at the prices it was accepted under. */
  function chargeFor(job: Job, output: GenerationOutput): bigint {
    switch (job.kind) {
      case "image":
        return imagePrice(job.model, job.input.prices, job.input.resolution!);
      case "video":
        return videoPrice(job.model, job.input.prices, job.input.resolution!, job.input.durationSeconds!);
      default:
        return tokenCost(job.model, job.input.prices, output.usage);
    }
  }

  async function finish(next: Job, expected: Job["status"]): Promise<void> {
    if (!(await deps.jobs.transition(next, expected))) return;
    if (next.status === "done") await deps.ledger.settle(next.accountId, next.reservationId, next.charged);
    else await deps.ledger.release(next.accountId, next.reservationId);
    await deps.bus.publish<JobFinished>(TOPICS.jobFinished, next.id, { jobId: next.id });
  }

  async function handle(event: GenerationRequested): Promise<void> {
    const job = await deps.jobs.get(event.jobId);
    if (!job || job.status !== "queued") return;
    const started = startJob(job, deps.clock.now());
    if (!(await deps.jobs.transition(started, "queued"))) return;
    try {
      const output = await withinBudget(job.timeoutSeconds, (signal) => generate(started, signal));
      let result: JobResult = { text: output.text };
      if (output.media) {
        const blobKey = `outputs/${job.id}/output.${EXTENSIONS[output.media.mimeType] ?? "bin"}`;
        await deps.blobs.put(blobKey, output.media.bytes, output.media.mimeType);
        result = { ...result, blobKey, mimeType: output.media.mimeType };
      }
      const usage = job.kind === "text" || job.kind === "multimodal_realtime" ? output.usage : undefined;
      await finish(completeJob(started, deps.clock.now(), result, chargeFor(job, output), usage), "processing");
    } catch (error) {
      const [code, message] =
        error instanceof ProviderError
          ? [error.code, error.message]
          : error instanceof JobTimeoutError
            ? ["timeout", error.message]
            : ["generation_failed", `generation failed: ${(error as Error).message}`];
      await finish(failJob(started, deps.clock.now(), code, message), "processing");
    }
  }

  return { handle };
}
