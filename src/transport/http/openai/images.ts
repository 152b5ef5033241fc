import { createHash } from "node:crypto";
import type { CallOptions } from "@connectrpc/connect";
import { JobStatus, type Job } from "../../../../gen/generation/v1/job_pb.js";
import { ModelKind } from "../../../../gen/generation/v1/model_pb.js";
import type { CoreClients } from "../../../core/index.js";
import { GatewayError } from "../gateway-error.js";
import { badParam } from "./chat-request.js";
import type { ImagesCall } from "./images-request.js";

/** How long a creation waits for its job before watching it (the jobs API's Prefer: wait bound). */
const WAIT_SECONDS = 60;

/** Failures of a job that are the prompt's, answered 400 as OpenAI answers a refused prompt; any other is the provider's. */
const PROMPT_FAILURES = new Set(["prompt_blocked", "output_blocked"]);

const TERMINAL = new Set([JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELED]);

/** The job once it ended: as the creation answered it, or from its event stream. */
async function finishedJob(core: CoreClients, jobId: string, options: CallOptions): Promise<Job> {
  for await (const event of core.generation.watchJob({ jobId }, options)) {
    if (event.job && TERMINAL.has(event.job.status)) return event.job;
  }
  throw new GatewayError(502, "generation_failed", `job ${jobId} ended without a result`);
}

/** A result link's bytes, read through the file service with the link's own signature. */
async function linkBytes(core: CoreClients, link: string, options: CallOptions): Promise<Buffer> {
  const url = new URL(link, "http://result.invalid");
  const key = decodeURIComponent(url.pathname.replace(/^\/files\//, ""));
  const chunks: Uint8Array[] = [];
  const request = { key, expires: BigInt(url.searchParams.get("expires") ?? "0"), signature: url.searchParams.get("signature") ?? "" };
  for await (const chunk of core.files.readFile(request, options)) chunks.push(chunk.data);
  return Buffer.concat(chunks);
}

/** The jobs API's limit on an Idempotency-Key; each image's key is derived from the caller's (a digest, always shorter). */
const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/**
 * Each image's job is created under a key of its own, derived from the caller's Idempotency-Key and its index; every
 * job carries the digest of the whole call (n and response_format too) in its metadata, so the jobs API's rule holds for
 * the call: the same key and call replay the same jobs, and another call under the key is the jobs' 422 idempotency_key_reused.
 */
interface ImagesIdempotency {
  readonly key: string;
  readonly call: string;
}

function imagesIdempotency(key: string, call: ImagesCall): ImagesIdempotency | undefined {
  if (key === "") return undefined;
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    throw new GatewayError(400, "invalid_idempotency_key", `Idempotency-Key is at most ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`);
  }
  const digest = (text: string) => createHash("sha256").update(text).digest("hex");
  const { model, prompt, n, aspectRatio = "", resolution = "", responseFormat } = call;
  return { key: digest(key), call: digest(JSON.stringify([model, prompt, n, aspectRatio, resolution, responseFormat])) };
}

/** One image: one job of the jobs API (reserved and charged at the model's per-image price), answered as OpenAI's image. */
async function oneImage(
  core: CoreClients, call: ImagesCall, options: CallOptions, index: number, idempotency?: ImagesIdempotency,
): Promise<{ url: string } | { b64_json: string }> {
  const { model, prompt, aspectRatio, resolution } = call;
  const keyed = idempotency ? { idempotencyKey: `openai-image-${index}-${idempotency.key}`, metadata: { openai_images_call: idempotency.call } } : {};
  const created = await core.generation.createGeneration({ model, prompt, aspectRatio, resolution, waitSeconds: WAIT_SECONDS, ...keyed }, options);
  const job = created.job && TERMINAL.has(created.job.status) ? created.job : await finishedJob(core, created.jobId, options);
  const link = job.result?.imageUrl;
  if (job.status !== JobStatus.DONE || !link) {
    const reason = job.error ?? "generation_failed";
    const message = `job ${job.jobId}: ${job.errorMessage ?? "the image could not be made"}`;
    throw new GatewayError(PROMPT_FAILURES.has(reason) ? 400 : 502, reason, message, undefined, PROMPT_FAILURES.has(reason) ? "prompt" : undefined);
  }
  if (call.responseFormat === "url") return { url: link };
  return { b64_json: (await linkBytes(core, link, options)).toString("base64") };
}

/** Whether the catalog knows `model` as an image model (undefined: unknown here, the core's call refuses it). */
async function isImageModel(core: CoreClients, model: string, options: CallOptions): Promise<boolean | undefined> {
  const { models } = await core.generation.listModels({}, options);
  const known = models.find((entry) => entry.id === model || entry.aliases.includes(model));
  return known && known.kind === ModelKind.IMAGE;
}

/** Jobs take text models too: a model the catalog knows as anything but an image model is refused before a job is made. */
async function requireImageModel(core: CoreClients, model: string, options: CallOptions): Promise<void> {
  if ((await isImageModel(core, model, options)) === false) throw badParam("model", `${model} is not an image model`, "unsupported_model");
}

/** Chat answers text only, so an image model (whose generateContent makes a charged image) is refused before anything is held. */
export async function refuseImageModel(core: CoreClients, model: string, options: CallOptions): Promise<void> {
  if (await isImageModel(core, model, options)) {
    throw badParam("model", `${model} is an image model: make images with images/generations`, "unsupported_model");
  }
}

/**
 * The `n` images, made at once; the first failure is the answer (images already made stay charged, as their jobs).
 * With an Idempotency-Key the first image's job is created first: a key reused for another call is refused by it, before any other job.
 */
export async function makeImages(core: CoreClients, call: ImagesCall, options: () => CallOptions, idempotencyKey = "") {
  const idempotency = imagesIdempotency(idempotencyKey, call);
  await requireImageModel(core, call.model, options());
  const first = idempotency ? await Promise.allSettled([oneImage(core, call, options(), 0, idempotency)]) : [];
  const more = first[0]?.status === "rejected" ? 0 : call.n - first.length;
  const rest = await Promise.allSettled(Array.from({ length: more }, (_, i) => oneImage(core, call, options(), first.length + i, idempotency)));
  const settled = [...first, ...rest];
  const failed = settled.find((result) => result.status === "rejected");
  if (failed) throw failed.reason;
  return { created: Math.floor(Date.now() / 1000), data: settled.map((result) => (result as PromiseFulfilledResult<object>).value) };
}
