import { isServedAsText, type ModelSpec } from "../catalog/models.js";
import { badRequest, invalid } from "../errors/domain-error.js";
import { mediaKindOf, type InlineMedia } from "../text/media-tokens.js";
import { countTokens, promptTokenEstimate } from "../text/tokens.js";
import { requireKnownModel } from "./generation-request.js";
import type { ValidationLimits } from "./limits.js";
import { checkTextPromptBytes } from "./prompt-size.js";

export interface TextPartInput {
  text?: string;
  hasInlineData?: boolean;
  /** The inline data's type, decoded size and first bytes: what the reservation counts it as. */
  inlineData?: InlineMedia;
}
export interface TextRequestInput {
  model: string;
  contents: readonly { role: string; parts: readonly TextPartInput[] }[];
  systemInstruction?: { parts: readonly TextPartInput[] };
  maxOutputTokens?: number;
  candidateCount?: number;
}

/** A synchronous text request that passed every rule. */
export interface TextSpec {
  readonly model: ModelSpec;
  /** The prompt as the simulated provider and the estimate read it. */
  readonly promptText: string;
  readonly promptTokens: number;
  /** Prompt tokens the reservation assumes: the text plus each inline media part by the vendor's rules (text/media-tokens.ts). */
  readonly reservedPromptTokens: number;
  readonly maxOutputTokens: number;
  /** The inline media parts (system instruction's included), as the reservation counted them. */
  readonly media: readonly InlineMedia[];
}

export function validateTextRequest(input: TextRequestInput, limits: ValidationLimits): TextSpec {
  const model = requireKnownModel(input.model);
  if (!isServedAsText(model)) {
    throw invalid("unsupported_model", `${model.id} is not a text model; create a job with POST /api/v1/generations`, {
      field: "model",
    });
  }
  if (input.contents.length === 0) throw invalid("invalid_contents", "contents must hold at least one content", { field: "contents" });
  // Before the text is joined or counted: a prompt over the limit costs no more than measuring it.
  checkTextPromptBytes(input, model, limits);
  const texts: string[] = [];
  for (const part of input.systemInstruction?.parts ?? []) if (part.text) texts.push(part.text);
  for (const content of input.contents) {
    for (const part of content.parts) if (part.text) texts.push(part.text.replaceAll("\u0000", ""));
  }
  const promptText = texts.join("\n");
  if (promptText.length === 0) {
    throw invalid("invalid_contents", "contents must hold at least one non-empty text part", { field: "contents" });
  }
  const modelMax = model.maxOutputTokens!;
  const maxOutputTokens = input.maxOutputTokens ?? modelMax;
  if (!Number.isInteger(maxOutputTokens) || maxOutputTokens < 1 || maxOutputTokens > modelMax) {
    throw invalid("invalid_max_output_tokens", `generationConfig.maxOutputTokens must be from 1 to ${modelMax}`, {
      field: "generationConfig.maxOutputTokens",
    });
  }
  if (input.candidateCount !== undefined && input.candidateCount !== 1) {
    throw invalid("invalid_candidate_count", "only candidateCount 1 is supported", { field: "generationConfig.candidateCount" });
  }
  const media = inlineMediaOf(input);
  return {
    model, promptText, promptTokens: countTokens(promptText), reservedPromptTokens: promptTokenEstimate(promptText, media), maxOutputTokens, media,
  };
}

/** The inline media parts, each of a type the reservation can bound (400 `unsupported_media_type` otherwise). */
function inlineMediaOf(input: TextRequestInput): InlineMedia[] {
  const media: InlineMedia[] = [];
  const collect = (parts: readonly TextPartInput[], field: string) =>
    parts.forEach((part, j) => {
      if (!part.inlineData) return;
      if (!mediaKindOf(part.inlineData.mimeType)) {
        throw badRequest(
          "unsupported_media_type",
          `${field}[${j}].inlineData.mimeType "${part.inlineData.mimeType}" is not supported: send images, audio, video or text`,
          { field: `${field}[${j}].inlineData.mimeType` },
        );
      }
      media.push(part.inlineData);
    });
  input.contents.forEach((content, i) => collect(content.parts, `contents[${i}].parts`));
  collect(input.systemInstruction?.parts ?? [], "systemInstruction.parts");
  return media;
}
