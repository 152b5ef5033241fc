import type { ModelKind, ModelSpec } from "../catalog/models.js";
import { invalid } from "../errors/domain-error.js";
import type { ValidationLimits } from "./limits.js";

/** Which prompt limit a model's kind falls under. */
export type PromptLimitKind = keyof ValidationLimits["maxPromptBytes"];

/**
 * The multimodal real-time model is served like a text model (synchronous
 * text API, billed per input token), so its prompts have the text limit: a
 * long prompt is paid for token by token, unlike a flat-priced image or video.
 */
const LIMIT_OF_KIND: Record<ModelKind, PromptLimitKind> = {
  image: "image",
  video: "video",
  text: "text",
  multimodal_realtime: "text",
};

export function promptLimitKind(model: ModelSpec): PromptLimitKind {
  return LIMIT_OF_KIND[model.kind];
}

export function promptByteLimit(model: ModelSpec, limits: ValidationLimits): number {
  return limits.maxPromptBytes[promptLimitKind(model)];
}

function tooLong(field: string, model: ModelSpec, limit: number, what = field) {
  const kind = promptLimitKind(model);
  return invalid("prompt_too_long", `${what} is longer than ${limit} bytes of UTF-8, the limit for ${kind} models`, {
    field, limit, kind,
  });
}

/**
 * UTF-8 bytes of the prompt as received (null bytes included). A string of
 * more UTF-16 units than the limit is refused without measuring it: UTF-8
 * never takes fewer bytes than UTF-16 takes units.
 */
export function checkPromptBytes(prompt: string, model: ModelSpec, limits: ValidationLimits, field = "prompt"): void {
  const limit = promptByteLimit(model, limits);
  if (prompt.length > limit || Buffer.byteLength(prompt, "utf8") > limit) throw tooLong(field, model, limit);
}

interface TextParts {
  readonly parts: readonly { readonly text?: string }[];
}

function* partTexts(request: { readonly contents: readonly TextParts[]; readonly systemInstruction?: TextParts }): Generator<string> {
  for (const part of request.systemInstruction?.parts ?? []) if (part.text) yield part.text;
  for (const content of request.contents) for (const part of content.parts) if (part.text) yield part.text;
}

/**
 * The synchronous text API: the text of every part of `contents` and of
 * `systemInstruction` counts, together (as received, without separators),
 * against one limit. Stops at the first part that takes the sum over it.
 */
export function checkTextPromptBytes(
  request: { readonly contents: readonly TextParts[]; readonly systemInstruction?: TextParts },
  model: ModelSpec,
  limits: ValidationLimits,
): void {
  const limit = promptByteLimit(model, limits);
  let total = 0;
  for (const text of partTexts(request)) {
    total += text.length > limit ? text.length : Buffer.byteLength(text, "utf8");
    if (total > limit) throw tooLong("contents", model, limit, "the text of contents and systemInstruction");
  }
}
