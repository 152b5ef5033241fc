import type { ModelSpec } from "../catalog/models.js";
import { badRequest } from "../errors/domain-error.js";
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

/**
 * Builds the upstream request from the caller's request in the vendor's JSON
 * (lowerCamelCase, without `model`): the allowed fields only, with
 * generationConfig.maxOutputTokens set to the bound the reservation assumed.
 */
export function upstreamTextBody(request: Record<string, unknown>, model: ModelSpec, maxOutputTokens: number): UpstreamTextBody {
  for (const key of Object.keys(request)) {
    if (!TOP_LEVEL.has(key)) {
      throw unsupported(key, "only contents, systemInstruction and generationConfig are passed to the model, which are billed by tokens");
    }
  }
  const contents = (request.contents ?? []) as { parts?: Record<string, unknown>[] }[];
  contents.forEach((content, i) => checkParts(content.parts, `contents[${i}].parts`));
  checkParts((request.systemInstruction as { parts?: Record<string, unknown>[] } | undefined)?.parts, "systemInstruction.parts");

  const config: Record<string, unknown> = { ...(isObject(request.generationConfig) ? request.generationConfig : {}) };
  for (const key of Object.keys(config)) {
    if (!GENERATION_CONFIG.has(key)) throw unsupported(`generationConfig.${key}`, "not a priced generation option");
  }
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
  if (request.systemInstruction !== undefined) body.systemInstruction = request.systemInstruction;
  const extraPromptTokens = config.responseSchema === undefined ? 0 : countTokens(JSON.stringify(config.responseSchema));
  return { body, extraPromptTokens };
}

/** Text and inline data only: a part of any other kind (fileData, functionCall, …) was not understood. */
function checkParts(parts: Record<string, unknown>[] | undefined, field: string): void {
  (parts ?? []).forEach((part, j) => {
    if (part.text === undefined && part.inlineData === undefined) {
      throw unsupported(`${field}[${j}]`, "only text and inlineData parts are accepted");
    }
  });
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
