import type { ModelSpec } from "../catalog/models.js";
import { badRequest, invalid } from "../errors/domain-error.js";
import { DEFAULT_LIMITS, type ValidationLimits } from "../validation/limits.js";
import { promptByteLimit, promptLimitKind } from "../validation/prompt-size.js";
import { countTokens } from "./tokens.js";

/**
 * The allow-list of the synchronous text API: what a caller's request may
 * carry to the upstream. Only what is priced (tokens in, tokens out) passes;
 * everything else is refused with 400 `unsupported_field` naming the field,
 * never forwarded as given. Refused because the vendor bills them apart from
 * tokens or they reach the operator's own resources: `tools` (paid search,
 * code execution, URL fetching), `toolConfig`, `cachedContent` (the
 * operator's caches), `safetySettings` (the operator's content policy).
 * A field added to the proto later is refused until it is listed here.
 */
const TOP_LEVEL = new Set(["contents", "systemInstruction", "generationConfig"]);

/** generationConfig fields that pass (maxOutputTokens is replaced by the reserved bound). */
const GENERATION_CONFIG = new Set([
  "maxOutputTokens", "temperature", "topP", "topK", "candidateCount", "stopSequences", "seed", "presencePenalty",
  "frequencyPenalty", "responseMimeType", "responseSchema", "responseModalities", "imageConfig", "thinkingConfig",
]);

const THINKING_CONFIG = new Set(["includeThoughts", "thinkingBudget", "thinkingLevel"]);

/** The roles a content may have upstream (parts of other kinds, such as function calls, are refused anyway). */
const ROLES = new Set(["user", "model"]);

/** Longest media type of an inline part that is forwarded (RFC 6838 names are at most 127 + 1 + 127 characters). */
export const MAX_MEDIA_TYPE_LENGTH = 255;

/** Output modalities a model's prices cover: text, and video for the multimodal real-time model. */
const outputModalities = (model: ModelSpec) => (model.kind === "multimodal_realtime" ? ["TEXT", "VIDEO"] : ["TEXT"]);

const unsupported = (field: string, why: string) =>
  badRequest("unsupported_field", `${field} is not supported by this API: ${why}`, { field });

export interface UpstreamTextBody {
  /** The vendor JSON to send upstream. */
  readonly body: Record<string, unknown>;
  /** Prompt tokens the upstream counts beyond the contents (a response schema), by our rule. */
  readonly extraPromptTokens: number;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

type ContentJson = { role?: unknown; parts?: Record<string, unknown>[] };

/**
 * Builds the upstream request from the caller's request in the vendor's JSON
 * (lowerCamelCase, without `model`): the allowed fields only, with
 * generationConfig.maxOutputTokens set to the bound the reservation assumed.
 * Nothing is forwarded unbounded: the text of the parts and the
 * generationConfig count together against the prompt limit (see
 * checkForwardedBytes; `limits`: the configured ones), a role is "user" or
 * "model", a media type is short.
 */
export function upstreamTextBody(
  request: Record<string, unknown>, model: ModelSpec, maxOutputTokens: number, limits: ValidationLimits = DEFAULT_LIMITS,
): UpstreamTextBody {
  for (const key of Object.keys(request)) {
    if (!TOP_LEVEL.has(key)) {
      throw unsupported(key, "only contents, systemInstruction and generationConfig are passed to the model, which are billed by tokens");
    }
  }
  const contents = (request.contents ?? []) as ContentJson[];
  contents.forEach((content, i) => {
    // Checked before it is measured or named anywhere: a role is one of two short words (the vendor knows no other).
    if (content.role !== undefined && !(typeof content.role === "string" && ROLES.has(content.role))) {
      throw unsupported(`contents[${i}].role`, `a content's role is "user" or "model"`);
    }
    checkParts(content.parts, `contents[${i}].parts`);
  });
  const systemInstruction = request.systemInstruction as ContentJson | undefined;
  checkParts(systemInstruction?.parts, "systemInstruction.parts");

  const config: Record<string, unknown> = { ...(isObject(request.generationConfig) ? request.generationConfig : {}) };
  for (const key of Object.keys(config)) {
    if (!GENERATION_CONFIG.has(key)) throw unsupported(`generationConfig.${key}`, "not a priced generation option");
  }
  checkForwardedBytes(contents, systemInstruction, config, model, limits);
  const modalities = config.responseModalities as string[] | undefined;
  const allowed = outputModalities(model);
  for (const modality of modalities ?? []) {
    if (!allowed.includes(modality)) {
      throw unsupported("generationConfig.responseModalities", `${model.id} is billed for ${allowed.join(" and ")} output only (got ${modality})`);
    }
  }
  if (config.thinkingConfig !== undefined) checkThinking(config.thinkingConfig, maxOutputTokens);
  // The reservation assumed at most this many output tokens (thinking included); the upstream is held to it.
  config.maxOutputTokens = maxOutputTokens;

  const body: Record<string, unknown> = { contents: request.contents ?? [], generationConfig: config };
  // The upstream reads only a system instruction's parts: its role (free text to us) is not forwarded.
  if (systemInstruction !== undefined) body.systemInstruction = { parts: systemInstruction.parts ?? [] };
  const extraPromptTokens = config.responseSchema === undefined ? 0 : countTokens(JSON.stringify(config.responseSchema));
  return { body, extraPromptTokens };
}

/** Text and inline data only: a part of any other kind (fileData, functionCall, …) was not understood. */
function checkParts(parts: Record<string, unknown>[] | undefined, field: string): void {
  (parts ?? []).forEach((part, j) => {
    if (part.text === undefined && part.inlineData === undefined) {
      throw unsupported(`${field}[${j}]`, "only text and inlineData parts are accepted");
    }
    const mimeType = (part.inlineData as { mimeType?: unknown } | undefined)?.mimeType;
    if (typeof mimeType === "string" && mimeType.length > MAX_MEDIA_TYPE_LENGTH) {
      throw unsupported(`${field}[${j}].inlineData.mimeType`, `a media type has at most ${MAX_MEDIA_TYPE_LENGTH} characters`);
    }
  });
}

/**
 * The prompt limit of the synchronous text API covers what is forwarded, not
 * only the text: the text of every part of contents and systemInstruction
 * (as validation/prompt-size.ts measures it, which has already refused text
 * over the limit on its own) plus the forwarded generationConfig as JSON
 * (responseSchema, stopSequences, …), together. Over it: 422
 * `prompt_too_long`, as a prompt too long is. Measured without recursion,
 * stopping as soon as the limit is passed.
 */
function checkForwardedBytes(
  contents: readonly ContentJson[], systemInstruction: ContentJson | undefined, config: Record<string, unknown>,
  model: ModelSpec, limits: ValidationLimits,
): void {
  const limit = promptByteLimit(model, limits);
  let total = 0;
  for (const content of [...(systemInstruction ? [systemInstruction] : []), ...contents]) {
    for (const part of content.parts ?? []) {
      if (typeof part.text === "string") total += part.text.length > limit ? part.text.length : Buffer.byteLength(part.text, "utf8");
    }
  }
  if (Object.keys(config).length > 0) total += jsonBytesWithin(config, limit - total);
  if (total > limit) {
    throw invalid(
      "prompt_too_long",
      `the text of contents and systemInstruction with generationConfig is longer than ${limit} bytes of UTF-8, the limit for ${promptLimitKind(model)} models`,
      { field: "generationConfig", limit, kind: promptLimitKind(model) },
    );
  }
}

/**
 * UTF-8 bytes of `JSON.stringify(value)`, counted with a stack instead of
 * recursion (no depth can overflow it); once the count passes `budget` it
 * stops and returns a number above it.
 */
export function jsonBytesWithin(value: unknown, budget: number): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && total <= budget) {
    const item = stack.pop();
    if (Array.isArray(item)) {
      total += 2 + Math.max(0, item.length - 1); // brackets and commas
      for (let i = item.length - 1; i >= 0; i--) stack.push(item[i] === undefined || typeof item[i] === "function" ? null : item[i]);
    } else if (typeof item === "object" && item !== null) {
      let members = 0;
      for (const key of Object.keys(item)) {
        const member = (item as Record<string, unknown>)[key];
        if (member === undefined || typeof member === "function") continue;
        total += stringBytes(key, budget - total) + 1; // "key":
        members++;
        stack.push(member);
        if (total > budget) return total;
      }
      total += 2 + Math.max(0, members - 1); // braces and commas
    } else if (typeof item === "string") {
      total += stringBytes(item, budget - total);
    } else {
      total += item === null ? 4 : String(JSON.stringify(item) ?? "null").length; // numbers, booleans (NaN and ∞ as null)
    }
  }
  return total;
}

/** Bytes of a JSON string literal; a string longer than the room left is not measured (it is over anyway). */
function stringBytes(text: string, room: number): number {
  if (text.length > room) return text.length + 2;
  return Buffer.byteLength(JSON.stringify(text), "utf8");
}

function checkThinking(thinking: unknown, maxOutputTokens: number): void {
  if (!isObject(thinking)) throw unsupported("generationConfig.thinkingConfig", "expected an object");
  for (const key of Object.keys(thinking)) {
    if (!THINKING_CONFIG.has(key)) throw unsupported(`generationConfig.thinkingConfig.${key}`, "not a priced thinking option");
  }
  const budget = thinking.thinkingBudget;
  if (budget !== undefined && !(Number.isInteger(budget) && (budget as number) >= 0 && (budget as number) <= maxOutputTokens)) {
    throw unsupported(
      "generationConfig.thinkingConfig.thinkingBudget",
      `thinking is billed as output, so its budget must be from 0 to the request's maxOutputTokens (${maxOutputTokens})`,
    );
  }
}
