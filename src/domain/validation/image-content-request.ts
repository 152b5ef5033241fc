import { findModel, type ModelSpec } from "../catalog/models.js";
import { badRequest, invalid } from "../errors/domain-error.js";
import { checkAspectRatio, checkImageResolution, normalizePrompt } from "./generation-request.js";
import type { ValidationLimits } from "./limits.js";
import { checkPromptBytes } from "./prompt-size.js";

/** Whether a generateContent call names an image model: it is answered with an image, under the image jobs' rules. */
export function isImageModelId(id: string): boolean {
  return findModel(id)?.kind === "image";
}

/** One part as these rules read it: its text, its inline data's type and decoded size, or the name of another kind. */
export interface ImageContentPart {
  readonly text?: string;
  readonly inlineData?: { readonly mimeType: string; readonly bytes: number };
  /** A part of a kind an image answer cannot take (functionCall, functionResponse). */
  readonly other?: string;
}

/** A generateContent request to an image model, as received. */
export interface ImageContentInput {
  readonly model: string;
  readonly contents: readonly { readonly parts: readonly ImageContentPart[] }[];
  readonly systemInstruction?: { readonly parts: readonly ImageContentPart[] };
  readonly responseModalities: readonly string[];
  readonly aspectRatio?: string;
  readonly imageSize?: string;
  readonly candidateCount?: number;
  /** The request's fields that are set, by their vendor name (tools, safetySettings, …). */
  readonly fieldsSet: readonly string[];
}

/** An image call that passed every rule: what the provider is asked for, and what it is priced by. */
export interface ImageContentSpec {
  readonly model: ModelSpec;
  /** The texts of the system instruction and the contents, in order. */
  readonly prompt: string;
  /** Undefined means "auto": no ratio is sent to the provider. */
  readonly aspectRatio?: string;
  /** The resolution imageSize maps to (the model's default when absent): the per-image price's key. */
  readonly resolution: string;
  /** Whether the caller asked for text parts beside the image (TEXT in responseModalities, or none named). */
  readonly wantsText: boolean;
}

/** Modalities an image model answers in. */
const MODALITIES = new Set(["TEXT", "IMAGE"]);

/**
 * Fields an image answer cannot honour (the upstream call is an image job's:
 * prompt, input images, aspect ratio, size), refused by name rather than
 * dropped: tools and a JSON schema would change what is answered, safety
 * settings what is refused.
 */
const NOT_FOR_IMAGES = [
  "tools", "toolConfig", "safetySettings", "cachedContent",
  "generationConfig.responseSchema", "generationConfig.responseJsonSchema", "generationConfig.responseMimeType",
];

const IMAGE_CONFIG = "generationConfig.imageConfig";

/**
 * The image jobs' rules (src/domain/validation/generation-request.ts) on a
 * generateContent request: the model's aspect ratios and resolutions (the
 * default as for jobs), the prompt limit of image models, input images
 * (`limits.maxInputImages`: the route's, and `maxInputBytes` in all), plus
 * what the vendor's shape adds (modalities, one candidate, no function parts).
 */
export function validateImageContentRequest(input: ImageContentInput, limits: ValidationLimits): ImageContentSpec {
  const model = findModel(input.model);
  if (!model || model.kind !== "image") throw invalid("unsupported_model", `${input.model} is not an image model`, { field: "model" });
  for (const field of NOT_FOR_IMAGES) {
    if (input.fieldsSet.includes(field)) {
      throw badRequest("unsupported_field", `${field} is not supported by this API for image models (${model.id})`, { field });
    }
  }
  const modalities = input.responseModalities.map((m) => m.toUpperCase());
  const odd = modalities.find((m) => !MODALITIES.has(m));
  if (odd !== undefined || (modalities.length > 0 && !modalities.includes("IMAGE"))) {
    const asked = JSON.stringify(input.responseModalities);
    throw badRequest("unsupported_field", `${model.id} answers with IMAGE, or TEXT and IMAGE (got responseModalities ${asked})`, {
      field: "generationConfig.responseModalities",
    });
  }
  if (input.candidateCount !== undefined && input.candidateCount !== 1) {
    throw invalid("invalid_candidate_count", "only candidateCount 1 is supported", { field: "generationConfig.candidateCount" });
  }
  if (input.contents.length === 0) throw invalid("invalid_contents", "contents must hold at least one content", { field: "contents" });
  const parts = [...(input.systemInstruction?.parts ?? []), ...input.contents.flatMap((content) => content.parts)];
  const other = parts.find((part) => part.other !== undefined);
  if (other) throw badRequest("unsupported_field", `${other.other} parts are not supported by image models (${model.id})`, { field: "contents" });
  const texts = parts.flatMap((part) => (part.text ? [part.text] : []));
  const joined = texts.join("\n");
  checkPromptBytes(joined, model, limits, "contents");
  const prompt = normalizePrompt(joined, "contents");
  checkInputImages(parts, limits);
  return {
    model,
    prompt,
    aspectRatio: checkAspectRatio(model, input.aspectRatio, undefined, `${IMAGE_CONFIG}.aspectRatio`),
    resolution: checkImageResolution(model, input.imageSize, `${IMAGE_CONFIG}.imageSize`),
    wantsText: modalities.length === 0 || modalities.includes("TEXT"),
  };
}

/** Input images as a job's: images only, at most `maxInputImages`, at most `maxInputBytes` decoded in all. */
function checkInputImages(parts: readonly ImageContentPart[], limits: ValidationLimits): void {
  const images = parts.flatMap((part) => (part.inlineData ? [part.inlineData] : []));
  const notImage = images.find((image) => !image.mimeType.toLowerCase().startsWith("image/"));
  if (notImage) {
    throw badRequest("unsupported_media_type", `inlineData.mimeType "${notImage.mimeType}" is not an image: image models take image inputs`, {
      field: "contents",
    });
  }
  if (images.length > limits.maxInputImages) {
    throw invalid("too_many_input_images", `at most ${limits.maxInputImages} input images per request (got ${images.length})`, {
      field: "contents", limit: limits.maxInputImages,
    });
  }
  const total = images.reduce((sum, image) => sum + image.bytes, 0);
  if (total > limits.maxInputBytes) {
    throw invalid("input_too_large", `input images total ${total} bytes; the limit is ${limits.maxInputBytes} bytes (200 MiB)`, {
      limit: limits.maxInputBytes,
    });
  }
}
