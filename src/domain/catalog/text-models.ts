import { DomainError, badRequest } from "../errors/domain-error.js";
import type { ValidationLimits } from "../validation/limits.js";
import { findModel, isServedAsText, MODELS, type ModelSpec } from "./models.js";

/**
 * The models of the synchronous text API (text models, and image models, which
 * answer generateContent with images) as the vendor's `models.list` and
 * `models.get` describe them (its Model resource), and the vendor's paging
 * rules (AIP-158): `pageSize` 0 means the default, larger than the maximum
 * means the maximum, a negative one is refused; `pageToken` is what the
 * previous page gave and nothing else.
 */

/** The vendor's default page size of models.list, and its maximum. */
export const DEFAULT_MODEL_PAGE_SIZE = 50;
export const MAX_MODEL_PAGE_SIZE = 1000;

/** Methods the vendor surface answers for every text model. */
export const TEXT_MODEL_METHODS = ["generateContent", "streamGenerateContent", "countTokens"] as const;

/** The resource name prefix of the vendor's models. */
export const MODEL_NAME_PREFIX = "models/";

export interface TextModelView {
  readonly name: string;
  readonly baseModelId: string;
  readonly version: string;
  readonly displayName: string;
  readonly description: string;
  readonly inputTokenLimit: number;
  readonly outputTokenLimit: number;
  readonly supportedGenerationMethods: readonly string[];
}

/** Methods the vendor surface answers for an image model: countTokens counts text prompts only, and refuses it. */
export const IMAGE_MODEL_METHODS = ["generateContent", "streamGenerateContent"] as const;

/** The text models, in catalog order. */
export const TEXT_MODELS: readonly ModelSpec[] = MODELS.filter(isServedAsText);

/** What models.list lists: the text models, then the image models, each in catalog order. */
export const LISTED_MODELS: readonly ModelSpec[] = [...TEXT_MODELS, ...MODELS.filter((model) => model.kind === "image")];

/** "aimodel-3.1-flash-lite" → "AIModel 3.1 Flash Lite". */
export function displayNameOf(id: string): string {
  return id
    .split("-")
    .map((word) => (word === "aimodel" ? "AIModel" : word.charAt(0).toUpperCase() + word.slice(1)))
    .join(" ");
}

/** The first dotted number of the id ("aimodel-3.5-flash" → "3.5"; "aimodel-omni-1.1-flash" → "1.1"). */
export function versionOf(id: string): string {
  return /\d+(?:\.\d+)*/.exec(id)?.[0] ?? "";
}

/**
 * Most prompt tokens a request may carry: the prompt limit is in UTF-8 bytes
 * and a token is at most 4 of them, so any prompt of this many tokens fits.
 */
export function inputTokenLimit(limits: ValidationLimits): number {
  return Math.floor(limits.maxPromptBytes.text / 4);
}

export function describeTextModel(model: ModelSpec, limits: ValidationLimits): TextModelView {
  if (model.kind === "image") return describeImageModel(model, limits);
  const description =
    model.kind === "multimodal_realtime"
      ? "Multimodal real-time model, served as text; billed per 1M tokens: input, text output and video output."
      : "Text generation; billed per 1M tokens: input and output.";
  return {
    name: MODEL_NAME_PREFIX + model.id,
    baseModelId: model.id,
    version: versionOf(model.id),
    displayName: displayNameOf(model.id),
    description,
    inputTokenLimit: inputTokenLimit(limits),
    outputTokenLimit: model.maxOutputTokens!,
    supportedGenerationMethods: TEXT_MODEL_METHODS,
  };
}

/**
 * An image model as the vendor describes its own: images through generateContent, priced per image. The prompt
 * limit is the image models' (MAX_PROMPT_BYTES_IMAGE / 4 tokens); no output token limit (0): the answer is an image.
 */
function describeImageModel(model: ModelSpec, limits: ValidationLimits): TextModelView {
  return {
    name: MODEL_NAME_PREFIX + model.id,
    baseModelId: model.id,
    version: versionOf(model.id),
    displayName: displayNameOf(model.id),
    description:
      `Image generation through generateContent (responseModalities IMAGE); billed per image by resolution (${model.resolutions.join(", ")}).`,
    inputTokenLimit: Math.floor(limits.maxPromptBytes.image / 4),
    outputTokenLimit: 0,
    supportedGenerationMethods: IMAGE_MODEL_METHODS,
  };
}

/** "models/{id}" or the bare id (an image model's alias too) → the listed model; NOT_FOUND for anything else (the vendor's 404). */
export function findTextModel(name: string): ModelSpec {
  const id = name.startsWith(MODEL_NAME_PREFIX) ? name.slice(MODEL_NAME_PREFIX.length) : name;
  const canonical = findModel(id)?.id;
  const model = LISTED_MODELS.find((m) => m.id === canonical);
  if (!model) {
    throw new DomainError("not_found", "unknown_model", `${MODEL_NAME_PREFIX}${id} is not found, or is not a text or image model`, {
      model: id,
    });
  }
  return model;
}

/** A page token names where the next page starts: base64url of "after:<id of the last model given>". */
const pageTokenAfter = (id: string) => Buffer.from(`after:${id}`, "utf8").toString("base64url");

export interface ModelPage {
  readonly models: readonly ModelSpec[];
  /** Empty on the last page. */
  readonly nextPageToken: string;
}

/** One page of LISTED_MODELS. */
export function textModelPage(pageSize: number, pageToken: string): ModelPage {
  if (!Number.isInteger(pageSize) || pageSize < 0) {
    throw badRequest("invalid_page_size", "pageSize must be a non-negative integer", { field: "pageSize" });
  }
  const size = pageSize === 0 ? DEFAULT_MODEL_PAGE_SIZE : Math.min(pageSize, MAX_MODEL_PAGE_SIZE);
  let start = 0;
  if (pageToken) {
    const index = LISTED_MODELS.findIndex((m) => pageTokenAfter(m.id) === pageToken);
    if (index < 0) throw badRequest("invalid_page_token", "pageToken is not one this service gave", { field: "pageToken" });
    start = index + 1;
  }
  const models = LISTED_MODELS.slice(start, start + size);
  const more = start + size < LISTED_MODELS.length;
  return { models, nextPageToken: more ? pageTokenAfter(models.at(-1)!.id) : "" };
}
