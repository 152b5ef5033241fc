import type { Money } from "../money.js";
import type { Job } from "../jobs/job.js";
import type { GenerationSpec } from "../validation/generation-request.js";
import { base64Head, imagePromptTokens, imageSizeOf } from "../text/media-tokens.js";
import { countTokens } from "../text/tokens.js";
import type { ModelPrices } from "./price-table.js";
import { imagePrice, tokenCost, tokenEstimate, videoPrice, type TokenUsage } from "./quotes.js";

/**
 * Prompt tokens a text job's input may cost: the prompt by our rule, each
 * inline image by the vendor's rules from its real dimensions, each image URL
 * (fetched only when the job runs) as an image of unknown size.
 */
export function jobPromptTokenBound(spec: Pick<GenerationSpec, "prompt" | "inputImageUrls" | "inlineImages">): number {
  let tokens = countTokens(spec.prompt) + spec.inputImageUrls.length * imagePromptTokens(undefined);
  for (const image of spec.inlineImages) tokens += imagePromptTokens(imageSizeOf(headOf(image)));
  return tokens;
}

/**
 * An inline image's first bytes: decoded from its base64, or those an image
 * staged while the request arrived kept (`head`); when they do not show its
 * size, it is counted as the largest image.
 */
function headOf(image: GenerationSpec["inlineImages"][number]): Uint8Array {
  if ("base64" in image) return base64Head(image.base64);
  return image.head;
}

/**
 * What to reserve when a job is accepted (billing rules 1 and 2). Text: the
 * input's bound plus the model's maximum output at the dearest output price;
 * the worker holds the upstream to that maximum (job.input.maxOutputTokens).
 */
export function quoteGeneration(spec: GenerationSpec, prices: ModelPrices | undefined): Money {
  const model = spec.model;
  switch (model.kind) {
    case "image":
      return imagePrice(model.id, prices, spec.resolution!);
    case "video":
      return videoPrice(model.id, prices, spec.resolution!, spec.durationSeconds!);
    case "text":
    case "multimodal_realtime":
      return tokenEstimate(model.id, prices, jobPromptTokenBound(spec), model.maxOutputTokens!);
  }
}

/**
 * What a finished job is charged (billing rule 3), at the prices it was
 * accepted under (job.input.prices), never today's: an image or a video its
 * quoted price, which its reservation holds; text (and the multimodal model)
 * the tokens it used, which its reservation bounds.
 */
export function chargeFor(job: Pick<Job, "kind" | "model" | "input">, usage: TokenUsage): Money {
  switch (job.kind) {
    case "image":
      return imagePrice(job.model, job.input.prices, job.input.resolution!);
    case "video":
      return videoPrice(job.model, job.input.prices, job.input.resolution!, job.input.durationSeconds!);
    default:
      return tokenCost(job.model, job.input.prices, usage);
  }
}
