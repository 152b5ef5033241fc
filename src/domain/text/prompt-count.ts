import type { TextSpec } from "../validation/text-request.js";
import { mediaKindOf, mediaPromptTokens } from "./media-tokens.js";

/** Prompt tokens of one modality, as the vendor's `promptTokensDetails` lists them. */
export interface ModalityCount {
  readonly modality: "TEXT" | "IMAGE" | "AUDIO" | "VIDEO";
  readonly tokenCount: number;
}

export interface PromptCount {
  readonly totalTokens: number;
  /** TEXT first (always), then each media modality present, in that order. */
  readonly details: readonly ModalityCount[];
}

const MEDIA_ORDER = ["IMAGE", "AUDIO", "VIDEO"] as const;

/**
 * What countTokens answers for a validated text request: the text (system
 * instruction included) by the service's rule, plus each inline media part by
 * the vendor's rule for it (text/media-tokens.ts), which is also what the
 * reservation assumed: totalTokens equals TextSpec.reservedPromptTokens plus
 * `extraTextTokens` (function declarations and a response schema, counted as
 * TEXT). Text documents sent inline count as TEXT.
 */
export function promptCount(spec: Pick<TextSpec, "promptTokens" | "media">, extraTextTokens = 0): PromptCount {
  const byModality = new Map<ModalityCount["modality"], number>([["TEXT", spec.promptTokens + extraTextTokens]]);
  for (const part of spec.media) {
    const kind = mediaKindOf(part.mimeType);
    const modality = kind === "image" ? "IMAGE" : kind === "text" ? "TEXT" : part.mimeType.trim().toLowerCase().startsWith("video/") ? "VIDEO" : "AUDIO";
    byModality.set(modality, (byModality.get(modality) ?? 0) + (mediaPromptTokens(part) ?? 0));
  }
  const details: ModalityCount[] = [{ modality: "TEXT", tokenCount: byModality.get("TEXT")! }];
  for (const modality of MEDIA_ORDER) {
    const tokenCount = byModality.get(modality);
    if (tokenCount !== undefined) details.push({ modality, tokenCount });
  }
  return { totalTokens: details.reduce((sum, d) => sum + d.tokenCount, 0), details };
}
