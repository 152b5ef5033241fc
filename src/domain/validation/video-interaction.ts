import { findModel, VIDEO_MODEL_ID } from "../catalog/models.js";
import { invalid } from "../errors/domain-error.js";
import { normalizePrompt, requireKnownModel, type GenerationSpec } from "./generation-request.js";
import { DEFAULT_TIMEOUT_SECONDS, VIDEO_INTERACTION_DURATION_RANGE, type ValidationLimits } from "./limits.js";
import { checkPromptBytes } from "./prompt-size.js";

export interface VideoInteractionInput {
  model: string;
  instances: readonly { prompt: string }[];
  parameters?: { durationSeconds?: number };
}

/**
 * The size rule, cheap and first: every instance's prompt within the prompt
 * limit of the model's kind. The service applies it before anything that
 * reads the whole request (its idempotency fingerprint).
 */
export function checkVideoInteractionSize(input: Pick<VideoInteractionInput, "model" | "instances">, limits: ValidationLimits): void {
  const model = requireKnownModel(input.model);
  input.instances.forEach((instance, i) => checkPromptBytes(instance.prompt, model, limits, `instances[${i}].prompt`));
}

/** The interactions endpoint (spec 2.7): one instance, 1 to 8 s, 720p. */
export function validateVideoInteraction(input: VideoInteractionInput, limits: ValidationLimits): GenerationSpec {
  checkVideoInteractionSize(input, limits);
  const model = requireKnownModel(input.model);
  if (model.id !== VIDEO_MODEL_ID || findModel(input.model)?.id !== input.model) {
    throw invalid("unsupported_model", `the interactions endpoint serves only ${VIDEO_MODEL_ID}`, { field: "model" });
  }
  if (input.instances.length !== 1) {
    throw invalid("invalid_instances", `instances must hold exactly one object (got ${input.instances.length})`, {
      field: "instances",
    });
  }
  const prompt = normalizePrompt(input.instances[0]!.prompt, "instances[0].prompt");
  const range = VIDEO_INTERACTION_DURATION_RANGE;
  const durationSeconds = input.parameters?.durationSeconds ?? range.default;
  if (!Number.isInteger(durationSeconds) || durationSeconds < range.min || durationSeconds > range.max) {
    throw invalid("invalid_duration", `parameters.durationSeconds must be an integer from ${range.min} to ${range.max}`, {
      field: "parameters.durationSeconds",
    });
  }
  return {
    model, prompt, durationSeconds, resolution: "720p", aspectRatio: "16:9",
    inputImageUrls: [], inlineImages: [], timeoutSeconds: DEFAULT_TIMEOUT_SECONDS,
  };
}
