import type { ModelSpec } from "../catalog/models.js";
import { badRequest, invalid } from "../errors/domain-error.js";
import { DEFAULT_LIMITS, type ValidationLimits } from "../validation/limits.js";
import { promptByteLimit, promptLimitKind } from "../validation/prompt-size.js";
import type { Money } from "../money.js";
import { toolFee, type ToolPrices } from "../pricing/tool-prices.js";
import { checkToolConfig, checkTools } from "./function-tools.js";
import { safetySettingsUpstream, type SafetyMinimums } from "./safety.js";
import { countTokens } from "./tokens.js";

/**
 * The allow-list of the synchronous text API: what a caller's request may
 * carry to the upstream. Only what is priced (tokens in, tokens out, a
 * built-in tool the operator priced per call) passes; everything else is
 * refused with 400 `unsupported_field` naming the field, never forwarded as
 * given: an unpriced built-in tool (billed by the vendor apart from tokens; see
 * function-tools.ts) and `cachedContent` (context caching is not offered). A field added to the proto later is refused until it is listed here.
 */
const TOP_LEVEL = new Set(["contents", "systemInstruction", "generationConfig", "tools", "toolConfig", "safetySettings"]);

/** generationConfig fields that pass (maxOutputTokens is replaced by the reserved bound). */
const GENERATION_CONFIG = new Set([
  "maxOutputTokens", "temperature", "topP", "topK", "candidateCount", "stopSequences", "seed", "presencePenalty",
  "frequencyPenalty", "responseMimeType", "responseSchema", "responseJsonSchema", "responseModalities", "imageConfig", "thinkingConfig",
]);

const THINKING_CONFIG = new Set(["includeThoughts", "thinkingBudget", "thinkingLevel"]);

/** The roles a content may have upstream ("function": a function response's, as the vendor's older clients send it). */
const ROLES = new Set(["user", "model", "function"]);

/** The vendor's thinking levels (its JSON spells them in capitals; lower case is accepted as the REST docs write them). */
const THINKING_LEVELS = new Set(["THINKING_LEVEL_UNSPECIFIED", "MINIMAL", "LOW", "MEDIUM", "HIGH"]);

/** What a part of a content may carry: its payload, and the marks the upstream puts on it. */
const PART_KEYS = new Set(["text", "inlineData", "functionCall", "functionResponse", "thought", "thoughtSignature"]);

/** Longest media type of an inline part that is forwarded (RFC 6838 names are at most 127 + 1 + 127 characters). */
export const MAX_MEDIA_TYPE_LENGTH = 255;

/** Output modalities a model's prices cover: text, and video for the multimodal real-time model. */
const outputModalities = (model: ModelSpec) => (model.kind === "multimodal_realtime" ? ["TEXT", "VIDEO"] : ["TEXT"]);

const unsupported = (field: string, why: string) =>
  badRequest("unsupported_field", `${field} is not supported by this API: ${why}`, { field });

export interface UpstreamTextBody {
  /** The vendor JSON to send upstream. */
  readonly body: Record<string, unknown>;
  /** Prompt tokens the upstream counts beyond the contents (function declarations, a response schema), by our rule. */
  readonly extraPromptTokens: number;
  /** Thinking tokens reserved on top of the answer's allowance (the upstream's maxOutputTokens is their sum). */
  readonly thinkingTokens: number;
  /** The priced built-in tools the request declares, each once. */
  readonly builtInTools: readonly string[];
  /** Their per-call prices, summed: held and charged on top of the tokens. */
  readonly toolFee: Money;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * An object of the vendor's with its member names in lowerCamelCase: a field typed as a free JSON object here
 * (thinkingConfig, tools, toolConfig) arrives as the client wrote it, and the vendor's clients may write
 * snake_case (its API accepts both). One level only: schemas and arguments inside are the caller's data.
 */
export function camelMembers(value: unknown): unknown {
  if (!isObject(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([key, member]) => [key.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase()), member]));
}

/** tools and toolConfig with their own member names (not the schemas' or arguments') in lowerCamelCase. */
function camelTools(request: Record<string, unknown>): { tools: unknown; toolConfig: unknown } {
  const tools = Array.isArray(request.tools)
    ? request.tools.map((tool) => {
      const named = camelMembers(tool) as Record<string, unknown>;
      if (!Array.isArray(named?.functionDeclarations)) return named;
      return { ...named, functionDeclarations: named.functionDeclarations.map(camelMembers) };
    })
    : request.tools;
  const toolConfig = camelMembers(request.toolConfig);
  const calling = isObject(toolConfig) ? { functionCallingConfig: camelMembers(toolConfig.functionCallingConfig) } : {};
  return { tools, toolConfig: isObject(toolConfig) && toolConfig.functionCallingConfig !== undefined ? { ...toolConfig, ...calling } : toolConfig };
}

type ContentJson = { role?: unknown; parts?: Record<string, unknown>[] };

/**
 * Builds the upstream request from the caller's request in the vendor's JSON
 * (lowerCamelCase, without `model`): the allowed fields only, with
 * generationConfig.maxOutputTokens set to the bound the reservation assumed:
 * the answer's allowance (`maxOutputTokens`) plus the thinking reserved.
 * Nothing is forwarded unbounded: the text of the parts, function parts and
 * declarations, safety settings and the generationConfig count together
 * against the prompt limit (see checkForwardedBytes; `limits`: the configured
 * ones), a role is one of three words, a media type is short. Safety settings
 * are raised to the operator's `safetyMinimums`. A built-in tool passes only
 * when `toolPrices` prices it.
 */
export function upstreamTextBody(
  request: Record<string, unknown>, model: ModelSpec, maxOutputTokens: number, limits: ValidationLimits = DEFAULT_LIMITS,
  safetyMinimums: SafetyMinimums = {}, toolPrices: ToolPrices = new Map(),
): UpstreamTextBody {
  for (const key of Object.keys(request)) {
    if (key === "cachedContent") throw unsupported(key, "context caching is not offered; send the whole conversation in contents");
    if (!TOP_LEVEL.has(key)) {
      throw unsupported(key, "only contents, systemInstruction, generationConfig, tools, toolConfig and safetySettings are passed to the model");
    }
  }
  const contents = (request.contents ?? []) as ContentJson[];
  contents.forEach((content, i) => {
    // Checked before it is measured or named anywhere: a role is one of three short words.
    if (content.role !== undefined && !(typeof content.role === "string" && ROLES.has(content.role))) {
      throw unsupported(`contents[${i}].role`, `a content's role is "user", "model" or "function"`);
    }
    checkParts(content.parts, `contents[${i}].parts`, true);
  });
  const systemInstruction = request.systemInstruction as ContentJson | undefined;
  checkParts(systemInstruction?.parts, "systemInstruction.parts", false);
  const { tools, toolConfig } = camelTools(request);
  const builtInTools = tools === undefined ? [] : [...new Set(checkTools(tools, new Set(toolPrices.keys())))];
  if (toolConfig !== undefined) checkToolConfig(toolConfig);
  const safetySettings = safetySettingsUpstream(request.safetySettings, safetyMinimums);

  const config: Record<string, unknown> = { ...(isObject(request.generationConfig) ? request.generationConfig : {}) };
  for (const key of Object.keys(config)) {
    if (!GENERATION_CONFIG.has(key)) throw unsupported(`generationConfig.${key}`, "not a priced generation option");
  }
  const forwarded = { ...config };
  for (const [key, value] of Object.entries({ tools, toolConfig, safetySettings })) {
    if (value !== undefined) forwarded[key] = value;
  }
  checkForwardedBytes(contents, systemInstruction, forwarded, model, limits);
  const modalities = config.responseModalities as string[] | undefined;
  const allowed = outputModalities(model);
  for (const modality of modalities ?? []) {
    if (!allowed.includes(modality)) {
      throw unsupported("generationConfig.responseModalities", `${model.id} is billed for ${allowed.join(" and ")} output only (got ${modality})`);
    }
  }
  if (config.thinkingConfig !== undefined) config.thinkingConfig = camelMembers(config.thinkingConfig);
  const thinkingTokens = config.thinkingConfig === undefined ? 0 : thinkingReserve(config.thinkingConfig, model);
  // The reservation assumed at most this many output tokens (thinking included); the upstream is held to it.
  config.maxOutputTokens = maxOutputTokens + thinkingTokens;

  const body: Record<string, unknown> = { contents: request.contents ?? [], generationConfig: config };
  // The upstream reads only a system instruction's parts: its role (free text to us) is not forwarded.
  if (systemInstruction !== undefined) body.systemInstruction = { parts: systemInstruction.parts ?? [] };
  if (tools !== undefined) body.tools = tools;
  if (toolConfig !== undefined) body.toolConfig = toolConfig;
  if (safetySettings !== undefined) body.safetySettings = safetySettings;
  return { body, extraPromptTokens: promptExtras(config, tools), thinkingTokens, builtInTools, toolFee: toolFee(builtInTools, toolPrices) };
}

/** promptExtras of a whole request in the vendor's JSON (what countTokens counts of a generateContentRequest). */
export function requestPromptExtras(request: Record<string, unknown>): number {
  return promptExtras(isObject(request.generationConfig) ? request.generationConfig : {}, camelTools(request).tools);
}

/** Prompt tokens the upstream counts beyond the contents: a response schema and the function declarations, each as JSON. */
export function promptExtras(config: Record<string, unknown>, tools: unknown): number {
  let tokens = 0;
  for (const schema of [config.responseSchema, config.responseJsonSchema]) if (schema !== undefined) tokens += countTokens(JSON.stringify(schema));
  if (Array.isArray(tools) && tools.length > 0) tokens += countTokens(JSON.stringify(tools));
  return tokens;
}

/** Text, inline data and (in contents, not a system instruction) function call and response parts. */
function checkParts(parts: Record<string, unknown>[] | undefined, field: string, functions: boolean): void {
  (parts ?? []).forEach((part, j) => {
    const isFunction = functions && (isObject(part.functionCall) || isObject(part.functionResponse));
    if (part.text === undefined && part.inlineData === undefined && !isFunction) {
      throw unsupported(`${field}[${j}]`, functions
        ? "only text, inlineData, functionCall and functionResponse parts are accepted"
        : "only text and inlineData parts are accepted");
    }
    for (const key of Object.keys(part)) if (!PART_KEYS.has(key)) throw unsupported(`${field}[${j}].${key}`, "not a part's field");
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
 * over the limit on its own), function call and response parts as JSON, plus
 * the forwarded generationConfig, tools, toolConfig and safetySettings as JSON
 * (responseSchema, stopSequences, declarations, …), together. Over it: 422
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
      const call = part.functionCall ?? part.functionResponse;
      if (call !== undefined) total += jsonBytesWithin(call, limit - total);
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

/**
 * Thinking tokens reserved for a thinkingConfig: its thinkingBudget (0 to the
 * model's largest), or that largest budget for a dynamic budget (-1) or a
 * thinkingLevel, which name no number; none when neither is set.
 */
export function thinkingReserve(thinking: unknown, model: ModelSpec): number {
  if (!isObject(thinking)) throw unsupported("generationConfig.thinkingConfig", "expected an object");
  for (const key of Object.keys(thinking)) {
    if (!THINKING_CONFIG.has(key)) throw unsupported(`generationConfig.thinkingConfig.${key}`, "not a priced thinking option");
  }
  const largest = model.maxThinkingTokens ?? 0;
  const { thinkingBudget: budget, thinkingLevel: level } = thinking;
  if (level !== undefined && !(typeof level === "string" && THINKING_LEVELS.has(level.toUpperCase()))) {
    throw unsupported("generationConfig.thinkingConfig.thinkingLevel", `expected one of ${[...THINKING_LEVELS].join(", ")}`);
  }
  if (budget !== undefined && !(Number.isInteger(budget) && (budget as number) >= -1 && (budget as number) <= largest)) {
    throw unsupported(
      "generationConfig.thinkingConfig.thinkingBudget",
      `thinking is billed as output and reserved on top of maxOutputTokens: a budget is from 0 to ${largest} for ${model.id}, or -1 (dynamic)`,
    );
  }
  if (level !== undefined || budget === -1) return largest;
  return (budget as number | undefined) ?? 0;
}
