import { randomUUID } from "node:crypto";
import { DomainError } from "../../domain/errors/domain-error.js";
import type { Job, JobKind } from "../../domain/jobs/job.js";
import { quoteGeneration } from "../../domain/pricing/quote-generation.js";
import type { GenerationSpec } from "../../domain/validation/generation-request.js";
import { TOPICS } from "../../ports/event-bus.js";
import type { Caller } from "../auth/api-key-auth.js";
import type { CoreDeps } from "../core-deps.js";

/** A job's hold in the ledger; the reaper derives it from the job id alone. */
export const reservationIdOf = (jobId: string) => `job:${jobId}`;

export interface GenerationRequested {
  readonly jobId: string;
}

async function ingestInlineImages(deps: CoreDeps, jobId: string, spec: GenerationSpec): Promise<string[]> {
  const keys: string[] = [];
  try {
    for (const [index, image] of spec.inlineImages.entries()) {
      const key = `inputs/${jobId}/${index}`;
      await deps.blobs.put(key, Buffer.from(image.base64, "base64"), image.mimeType);
      keys.push(key);
    }
    return keys;
  } catch (error) {
    await Promise.allSettled(keys.map((key) => deps.blobs.delete(key)));
    throw new DomainError("upstream_failure", "upstream_storage_failure", `storing input images failed: ${(error as Error).message}`);
  }
}

/**
 * Accepts a validated job: stores inline inputs, reserves its price, stores
 * it queued and announces it. A failure before the job is stored undoes what
 * was done, so a refused request leaves no job, no blob and no hold behind;
 * once stored, the job is accepted whatever happens next.
 */
export async function acceptJob(deps: CoreDeps, caller: Caller, spec: GenerationSpec, route?: string): Promise<Job> {
  const prices = (await deps.settings.prices()).get(spec.model.id);
  const price = quoteGeneration(spec, prices);
  const jobId = randomUUID();
  const inputBlobKeys = await ingestInlineImages(deps, jobId, spec);
  // After the (possibly long) ingest, so the reaper's age of an unfinished acceptance starts at its hold.
  const createdAt = deps.clock.now();
  const reservationId = reservationIdOf(jobId);
  const undo = async () => {
    await Promise.allSettled(inputBlobKeys.map((key) => deps.blobs.delete(key)));
    await deps.jobs.markFinalized(jobId);
  };

  await deps.jobs.registerIntent(jobId, caller.accountId, createdAt);
  const outcome = await deps.ledger.reserve(caller.accountId, reservationId, price);
  if (outcome !== "reserved") {
    await undo();
    if (outcome === "unknown_account") throw new DomainError("unauthenticated", "inactive_account", "the key's account no longer exists");
    throw new DomainError("insufficient_funds", "insufficient_funds", "the available balance does not cover this request", {
      required: price.toString(),
    });
  }

  const job: Job = {
    id: jobId,
    accountId: caller.accountId,
    model: spec.model.id,
    kind: spec.model.kind as JobKind,
    status: "queued",
    input: {
      prompt: spec.prompt,
      aspectRatio: spec.aspectRatio,
      resolution: spec.resolution,
      durationSeconds: spec.durationSeconds,
      inputImageUrls: spec.inputImageUrls,
      inputBlobKeys,
      maxOutputTokens: spec.model.maxOutputTokens,
      prices,
      route,
    },
    createdAt,
    timeoutSeconds: spec.timeoutSeconds,
    reservationId,
    reserved: price,
    charged: 0n,
    callbackUrl: spec.callbackUrl,
    metadata: spec.metadata,
  };
  try {
    await deps.jobs.create(job);
  } catch (error) {
    if (!(await deps.jobs.get(jobId))) {
      await deps.ledger.release(caller.accountId, reservationId);
      await undo();
    }
    throw error;
  }
  // Stored means accepted: a lost announcement must not turn into an error the client retries
  // (that would create a second job); the reaper announces a queued job again.
  try {
    await deps.bus.publish<GenerationRequested>(TOPICS.generationRequested, jobId, { jobId });
  } catch (error) {
    deps.log(`job ${jobId} is stored but its announcement failed; the reaper will announce it`, error);
  }
  return job;
}
