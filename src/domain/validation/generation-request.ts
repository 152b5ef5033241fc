import { AUTO } from "../catalog/aspect-ratios.js";
import { findModel, type ModelSpec } from "../catalog/models.js";
import { badRequest, invalid } from "../errors/domain-error.js";
import { parseInlineImage, type InlineImage, type StagedInlineImage } from "./inline-images.js";
import {
  DEFAULT_TIMEOUT_SECONDS, HIGH_RES_VIDEO_DURATION, TIMEOUT_RANGE, VIDEO_JOB_DURATION_RANGE, type ValidationLimits,
} from "./limits.js";
import { checkMetadata } from "./metadata.js";
import { checkPromptBytes } from "./prompt-size.js";
import { isHttpUrl } from "./urls.js";
import { checkTextLength, MAX_URL_CHARACTERS } from "./text-fields.js";

export type JsonObject = { [key: string]: unknown };

/** How the deprecated alias routes constrain inputs. */
export type InputMode = "any" | "text_only" | "image_urls";

/** The fields of POST /api/v1/generations, as received. */
export interface GenerationRequestInput {
  model: string;
  prompt: string;
  aspectRatio?: string;
  resolution?: string;
  inputImagesUrls: readonly string[];
  inputImagesBase64: readonly string[];
  /** Inline images a large request's body already had decoded into the blob store (they count like inputImagesBase64). */
  stagedImages?: readonly StagedInlineImage[];
  callbackUrl?: string;
  metadata?: JsonObject;
  timeout?: number;
  durationSeconds?: number;
  inputMode?: InputMode;
}

/** A request that passed every rule, normalized for pricing and the worker. */
export interface GenerationSpec {
  readonly model: ModelSpec;
  readonly prompt: string;
  /** Undefined means "auto": no ratio is sent to the provider. */
  readonly aspectRatio?: string;
  /** Image: 1K/2K/4K; video: 720p/1080p/4k; undefined for text. */
  readonly resolution?: string;
  readonly durationSeconds?: number;
  readonly inputImageUrls: readonly string[];
  readonly inlineImages: readonly (InlineImage | StagedInlineImage)[];
  readonly callbackUrl?: string;
  readonly metadata?: JsonObject;
  readonly timeoutSeconds: number;
}

export function requireKnownModel(id: string): ModelSpec {
  // A missing model is a validation failure (422 on every surface); an unknown one is the vendor surface's 404.
  if (!id) throw invalid("missing_model", "model is required", { field: "model" });
  const model = findModel(id);
  if (!model) throw invalid("unknown_model", `unknown model "${id}"`, { field: "model" });
  return model;
}

/** Strips null bytes (spec 2.2) and insists on at least one character left. */
export function normalizePrompt(prompt: string, field = "prompt"): string {
  const cleaned = prompt.replaceAll("\u0000", "");
  if (cleaned.length < 1) throw invalid("invalid_prompt", `${field} must contain at least 1 character`, { field });
  return cleaned;
}

function checkTimeout(timeout: number | undefined): number {
  if (timeout === undefined) return DEFAULT_TIMEOUT_SECONDS;
  if (!Number.isInteger(timeout) || timeout < TIMEOUT_RANGE.min || timeout > TIMEOUT_RANGE.max) {
    throw invalid("invalid_timeout", `timeout must be an integer from ${TIMEOUT_RANGE.min} to ${TIMEOUT_RANGE.max} seconds`, {
      field: "timeout",
    });
  }
  return timeout;
}

function checkInputs(input: GenerationRequestInput, limits: ValidationLimits): (InlineImage | StagedInlineImage)[] {
  const mode = input.inputMode ?? "any";
  const staged = input.stagedImages ?? [];
  const count = input.inputImagesUrls.length + input.inputImagesBase64.length + staged.length;
  if (mode === "text_only" && count > 0) {
    throw invalid("input_images_not_allowed", "this endpoint generates from text only; use url-generations for input images");
  }
  if (mode === "image_urls" && input.inputImagesUrls.length === 0) {
    throw invalid("missing_input_image_urls", "input_images_urls must name at least one image", { field: "input_images_urls" });
  }
  if (count > limits.maxInputImages) {
    throw invalid("too_many_input_images", `at most ${limits.maxInputImages} input images per request (got ${count})`, {
      field: "input_images_urls", limit: limits.maxInputImages,
    });
  }
  input.inputImagesUrls.forEach((url, i) => {
    checkTextLength(`input_images_urls[${i}]`, url, MAX_URL_CHARACTERS);
    if (!isHttpUrl(url)) {
      throw invalid("invalid_input_image_url", `input_images_urls[${i}] must be an http:// or https:// URL`, {
        field: `input_images_urls[${i}]`,
      });
    }
  });
  const inline = [...staged, ...input.inputImagesBase64.map((value, i) => parseInlineImage(value, staged.length + i))];
  const total = inline.reduce((sum, image) => sum + image.decodedBytes, 0);
  if (total > limits.maxInputBytes) {
    throw invalid("input_too_large", `input images total ${total} bytes; the limit is ${limits.maxInputBytes} bytes (200 MiB)`, {
      limit: limits.maxInputBytes,
    });
  }
  return inline;
}

/** A job's aspect-ratio rule; `field` names it as the caller's surface spells it. */
export function checkAspectRatio(model: ModelSpec, requested: string | undefined, fallback?: string, field = "aspect_ratio"): string | undefined {
  if (requested === undefined || requested === "") {
    if (model.requiresAspectRatioAndResolution) {
      throw invalid("missing_aspect_ratio", `${model.id} requires ${field}`, { field });
    }
    return fallback;
  }
  if (!model.aspectRatios.includes(requested)) {
    throw invalid("unsupported_aspect_ratio", `${model.id} does not support ${field} "${requested}" (supported: ${model.aspectRatios.join(", ")})`, {
      field,
    });
  }
  return requested === AUTO ? undefined : requested;
}

/** A job's image-resolution rule (default, case, the model's set); `field` names it as the caller's surface spells it. */
export function checkImageResolution(model: ModelSpec, requested: string | undefined, field = "resolution"): string {
  if (model.ignoresResolution) return model.defaultResolution!;
  if (requested === undefined || requested === "") {
    if (model.requiresAspectRatioAndResolution) {
      throw invalid("missing_resolution", `${model.id} requires ${field}`, { field });
    }
    return model.defaultResolution!;
  }
  const normalized = requested.toUpperCase();
  if (!model.resolutions.includes(normalized)) {
    throw invalid("unsupported_resolution", `${model.id} does not support ${field} "${requested}" (supported: ${model.resolutions.join(", ")})`, {
      field,
    });
  }
  return normalized;
}

/** "1K" is the legacy name of 720p. */
export function normalizeVideoResolution(model: ModelSpec, requested: string | undefined): string {
  if (requested === undefined || requested === "") return model.defaultResolution!;
  const lower = requested.toLowerCase();
  const normalized = lower === "1k" ? "720p" : lower;
  if (!model.resolutions.includes(normalized)) {
    throw invalid("unsupported_resolution", `video resolution must be one of 720p, 1080p, 4k (got "${requested}")`, {
      field: "resolution",
    });
  }
  return normalized;
}

function checkVideoDuration(resolution: string, requested: number | undefined): number {
  const highRes = resolution !== "720p";
  if (requested === undefined) return highRes ? HIGH_RES_VIDEO_DURATION : VIDEO_JOB_DURATION_RANGE.min;
  if (highRes && requested !== HIGH_RES_VIDEO_DURATION) {
    throw badRequest("video_duration_requires_8s", `${resolution} video is only made in ${HIGH_RES_VIDEO_DURATION}-second clips (got ${requested})`, {
      field: "duration_seconds",
    });
  }
  if (!Number.isInteger(requested) || requested < VIDEO_JOB_DURATION_RANGE.min || requested > VIDEO_JOB_DURATION_RANGE.max) {
    throw invalid("invalid_duration", `duration_seconds must be an integer from ${VIDEO_JOB_DURATION_RANGE.min} to ${VIDEO_JOB_DURATION_RANGE.max}`, {
      field: "duration_seconds",
    });
  }
  return requested;
}

/**
 * The size rules, cheap and first: the model (whose kind decides the prompt
 * limit), the prompt's UTF-8 bytes, then `metadata`. The service applies them
 * before anything that reads the whole request (its idempotency fingerprint).
 */
export function checkGenerationSize(
  input: Pick<GenerationRequestInput, "model" | "prompt" | "metadata" | "callbackUrl">, limits: ValidationLimits,
): ModelSpec {
  const model = requireKnownModel(input.model);
  checkPromptBytes(input.prompt, model, limits);
  checkMetadata(input.metadata, limits.metadata);
  if (input.callbackUrl !== undefined) checkTextLength("callback_url", input.callbackUrl, MAX_URL_CHARACTERS);
  return model;
}

/** Applies every rule of the spec's sections 2.2, 7 and 8 to a job request. */
export function validateGenerationRequest(input: GenerationRequestInput, limits: ValidationLimits): GenerationSpec {
  const model = checkGenerationSize(input, limits);
  const prompt = normalizePrompt(input.prompt);
  const timeoutSeconds = checkTimeout(input.timeout);
  if (input.callbackUrl !== undefined && input.callbackUrl !== "" && !isHttpUrl(input.callbackUrl)) {
    throw invalid("invalid_callback_url", "callback_url must be an http:// or https:// URL", { field: "callback_url" });
  }
  const common = {
    model, prompt, timeoutSeconds,
    callbackUrl: input.callbackUrl || undefined,
    metadata: input.metadata,
  };
  switch (model.kind) {
    case "image": {
      const aspectRatio = checkAspectRatio(model, input.aspectRatio);
      const resolution = checkImageResolution(model, input.resolution);
      const inlineImages = checkInputs(input, limits);
      return { ...common, aspectRatio, resolution, inputImageUrls: input.inputImagesUrls, inlineImages };
    }
    case "video": {
      const resolution = normalizeVideoResolution(model, input.resolution);
      const durationSeconds = checkVideoDuration(resolution, input.durationSeconds);
      const aspectRatio = checkAspectRatio(model, input.aspectRatio, "16:9") ?? "16:9";
      const inlineImages = checkInputs(input, limits);
      return { ...common, aspectRatio, resolution, durationSeconds, inputImageUrls: input.inputImagesUrls, inlineImages };
    }
    case "text":
    case "multimodal_realtime": {
      // The spec's text example sends aspect_ratio "auto" and resolution "1K":
      // both are accepted and have no effect on text.
      const inlineImages = checkInputs(input, limits);
      return { ...common, inputImageUrls: input.inputImagesUrls, inlineImages };
    }
  }
}
