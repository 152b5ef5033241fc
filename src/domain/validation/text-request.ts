import { isServedAsText, type ModelSpec } from "../catalog/models.js";
import { invalid } from "../errors/domain-error.js";
import { countTokens, promptTokenEstimate } from "../text/tokens.js";
import { requireKnownModel } from "./generation-request.js";

export interface TextPartInput {
  text?: string;
  hasInlineData?: boolean;
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
  /** Prompt tokens the reservation assumes: the text plus an allowance per inline image. */
  readonly reservedPromptTokens: number;
  readonly maxOutputTokens: number;
}

export function validateTextRequest(input: TextRequestInput): TextSpec {
  const model = requireKnownModel(input.model);
  if (!isServedAsText(model)) {
    throw invalid("unsupported_model", `${model.id} is not a text model; create a job with POST /api/v1/generations`, {
      field: "model",
    });
  }
  if (input.contents.length === 0) throw invalid("invalid_contents", "contents must hold at least one content", { field: "contents" });
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
  const images = [...input.contents.flatMap((c) => c.parts), ...(input.systemInstruction?.parts ?? [])].filter((p) => p.hasInlineData).length;
  return { model, promptText, promptTokens: countTokens(promptText), reservedPromptTokens: promptTokenEstimate(promptText, images), maxOutputTokens };
}
