import { DomainError } from "../../domain/errors/domain-error.js";
import type { Job, JobKind } from "../../domain/jobs/job.js";
import { quoteGeneration } from "../../domain/pricing/quote-generation.js";
import type { GenerationSpec } from "../../domain/validation/generation-request.js";
import type { Caller } from "../auth/api-key-auth.js";
import type { CoreDeps } from "../core-deps.js";
import { OutcomeUnknown } from "./idempotent.js";
import { refusalError, reservationIdOf, takeHoldWithJob, unfinishedJobsAtMost } from "../money/holds.js";
import { AcceptanceOutcomeUnknown, type AcceptanceOutcome, type Announcement } from "../../ports/acceptance-writes.js";
import { TOPICS } from "../../ports/event-bus.js";
import type { HoldMemo, ReserveOptions } from "../../ports/ledger.js";


export interface GenerationRequested {
  readonly jobId: string;
}

/** A stored job's announcement to the generation workers (keyed by its id: one partition per job's events). */
export const generationRequested = (jobId: string): Announcement & { readonly event: GenerationRequested } => ({
  topic: TOPICS.generationRequested, key: jobId, event: { jobId },
});

async function ingestInlineImages(deps: CoreDeps, jobId: string, spec: GenerationSpec): Promise<string[]> {
  const keys: string[] = [];
  try {
    for (const [index, image] of spec.inlineImages.entries()) {
      const key = `inputs/${jobId}/${index}`;
      if ("ref" in image) {
        // Decoded into the store while the request arrived: it only changes its key.
        if (!(await deps.blobs.move(image.ref, key))) throw new Error(`staged input image ${index} is gone`);
      } else {
        await deps.blobs.put(key, Buffer.from(image.base64, "base64"), image.mimeType);
      }
      keys.push(key);
    }
    return keys;
  } catch (error) {
    await Promise.allSettled(keys.map((key) => deps.blobs.delete(key)));
    throw new DomainError("upstream_failure", "upstream_storage_failure", `storing input images failed: ${(error as Error).message}`);
  }
}

/** Announces a stored job to the generation workers; retries in the background when the bus cannot take it now. */
export type Announce = (jobId: string) => Promise<void>;

/**
 * Accepts a validated job under the id its Idempotency-Key claim named:
 * stores inline inputs, reserves its price, stores it queued and announces
 * it. A failure before the job is stored undoes what was done, so a refused
 * request leaves no job, no blob and no hold behind; once stored, the job is
 * accepted whatever happens next (an announcement that cannot be made now is
 * made later, never turned into an error the client would retry).
 */
export async function acceptJob(
  deps: CoreDeps, announce: Announce, caller: Caller, jobId: string, spec: GenerationSpec, route?: string,
): Promise<Job> {
  const prices = (await deps.settings.prices()).get(spec.model.id);
  const price = quoteGeneration(spec, prices);
  const inputBlobKeys = await ingestInlineImages(deps, jobId, spec);
  // After the (possibly long) ingest, so the reaper's age of an unfinished acceptance starts at its hold.
  const createdAt = deps.clock.now();
  const reservationId = reservationIdOf(jobId);
  const dropInputs = async () => {
    await Promise.allSettled(inputBlobKeys.map((key) => deps.blobs.delete(key)));
  };

  const cap = deps.settingsOf.maxQueuedJobsPerAccount;
  const memo = { jobId, model: spec.model.id, keyId: caller.keyId };
  const key = { keyId: caller.keyId, limits: caller.limits, isJob: true };
  const holdOptions = { ...unfinishedJobsAtMost(cap), key };
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

  const written = await acceptanceWrites(deps, job, memo, holdOptions);
  if (written === "fenced") {
    // Nothing of this acceptance stands but the inputs.
    await dropInputs();
    throw supersededError();
  } else if (written !== "reserved" && written !== "stored" && written !== "exists") {
    await dropInputs();
    throw refusalError(written, price, cap);
  }
  deps.telemetry.observe({ kind: "job_accepted", model: job.model });
  // Announced by the one write; otherwise now (a job found stored already is announced again).
  if (written !== "reserved") await announce(jobId);
  return job;
}

/**
 * The acceptance's writes (AcceptanceWrites: hold, job, and the announcement
 * where the stores and the bus write them together). A store that went away
 * after the hold was taken, while the job was being stored, leaves the
 * outcome unknown: the claim stays for a retry to resolve.
 */
async function acceptanceWrites(deps: CoreDeps, job: Job, memo: HoldMemo, holdOptions: ReserveOptions): Promise<AcceptanceOutcome> {
  try {
    return await takeHoldWithJob(deps, job, memo, holdOptions, generationRequested(job.id));
  } catch (error) {
    if (error instanceof AcceptanceOutcomeUnknown) throw new OutcomeUnknown(error.dependency, { cause: error.cause });
    throw error;
  }
}

/** The acceptance whose Idempotency-Key a retry took over (it found this one dead): 409, retry to get the job. */
const supersededError = () =>
  new DomainError(
    "conflict", "idempotency_key_in_use", "this request was superseded by a retry with the same Idempotency-Key; retry to get its job", {}, 1,
  );
