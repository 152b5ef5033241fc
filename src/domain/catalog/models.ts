import { FAST_MODEL_ASPECT_RATIOS, FULL_ASPECT_RATIOS, VIDEO_ASPECT_RATIOS } from "./aspect-ratios.js";

export type ModelKind = "image" | "text" | "video" | "multimodal_realtime";

export const IMAGE_RESOLUTIONS = ["1K", "2K", "4K"] as const;
export const VIDEO_RESOLUTIONS = ["720p", "1080p", "4k"] as const;
export type ImageResolution = (typeof IMAGE_RESOLUTIONS)[number];
export type VideoResolution = (typeof VIDEO_RESOLUTIONS)[number];

export interface ModelSpec {
  readonly id: string;
  readonly kind: ModelKind;
  /** Accepted resolutions (image or video); empty for text. */
  readonly resolutions: readonly string[];
  readonly aspectRatios: readonly string[];
  /** Resolution used when the request names none (or when it is ignored). */
  readonly defaultResolution?: string;
  /** The fast model ignores `resolution` and always renders 1K. */
  readonly ignoresResolution?: boolean;
  /** The newer image models need both fields in every request. */
  readonly requiresAspectRatioAndResolution?: boolean;
  /** A `-preview` alias is accepted for image models that have one. */
  readonly acceptsPreviewSuffix?: boolean;
  /** A `*` grant does not include it: the key must name it. */
  readonly needsExplicitGrant?: boolean;
  /** Text and multimodal: bound of output tokens, used for reservations. */
  readonly maxOutputTokens?: number;
  /** Text: the largest thinking budget; reserved for a thinkingLevel or a dynamic budget (-1). */
  readonly maxThinkingTokens?: number;
  /** Video via the jobs API. */
  readonly jobDurations?: readonly number[];
}

const TEXT_MAX_OUTPUT_TOKENS = 8192;

/** The vendor's largest thinking budgets: its pro models think up to 32768 tokens, the others up to 24576. */
const FLASH_MAX_THINKING_TOKENS = 24_576;
const PRO_MAX_THINKING_TOKENS = 32_768;

const text = (id: string, maxThinkingTokens = FLASH_MAX_THINKING_TOKENS): ModelSpec => ({
  id, kind: "text", resolutions: [], aspectRatios: FULL_ASPECT_RATIOS, maxOutputTokens: TEXT_MAX_OUTPUT_TOKENS, maxThinkingTokens,
});

/** The model catalog of the spec, section 2.1, in its order. */
export const MODELS: readonly ModelSpec[] = [
  { id: "aimodel-2.5-flash-image", kind: "image", resolutions: ["1K"], aspectRatios: FAST_MODEL_ASPECT_RATIOS,
    defaultResolution: "1K", ignoresResolution: true, acceptsPreviewSuffix: true },
  { id: "aimodel-3.1-flash-image", kind: "image", resolutions: IMAGE_RESOLUTIONS, aspectRatios: FULL_ASPECT_RATIOS,
    defaultResolution: "1K", acceptsPreviewSuffix: true },
  { id: "aimodel-3-pro-image", kind: "image", resolutions: IMAGE_RESOLUTIONS, aspectRatios: FULL_ASPECT_RATIOS,
    defaultResolution: "1K", acceptsPreviewSuffix: true },
  { id: "aimodel-3.1-flash-lite-image", kind: "image", resolutions: ["1K"], aspectRatios: FULL_ASPECT_RATIOS,
    defaultResolution: "1K", requiresAspectRatioAndResolution: true, needsExplicitGrant: true },
  { id: "aimodel-nbx-2.1", kind: "image", resolutions: IMAGE_RESOLUTIONS, aspectRatios: FULL_ASPECT_RATIOS,
    defaultResolution: "1K", requiresAspectRatioAndResolution: true },
  text("aimodel-3-flash-preview"),
  text("aimodel-3.1-flash-lite"),
  text("aimodel-3.1-pro-preview", PRO_MAX_THINKING_TOKENS),
  text("aimodel-3.5-flash"),
  text("aimodel-3.5-flash-lite"),
  text("aimodel-3.6-flash"),
  text("aimodel-3.7-flash"),
  { id: "videomodel-3.1-generate-001", kind: "video", resolutions: VIDEO_RESOLUTIONS, aspectRatios: VIDEO_ASPECT_RATIOS,
    defaultResolution: "720p", jobDurations: [4, 5, 6, 7, 8] },
  { id: "aimodel-omni-1.1-flash", kind: "multimodal_realtime", resolutions: [], aspectRatios: FULL_ASPECT_RATIOS,
    maxOutputTokens: TEXT_MAX_OUTPUT_TOKENS, maxThinkingTokens: FLASH_MAX_THINKING_TOKENS },
];

export const VIDEO_MODEL_ID = "videomodel-3.1-generate-001";
export const PREVIEW_SUFFIX = "-preview";

const byId = new Map(MODELS.map((m) => [m.id, m]));

/** Resolves a requested id, accepting the `-preview` suffix where allowed. */
export function findModel(requested: string): ModelSpec | undefined {
  const exact = byId.get(requested);
  if (exact) return exact;
  if (requested.endsWith(PREVIEW_SUFFIX)) {
    const base = byId.get(requested.slice(0, -PREVIEW_SUFFIX.length));
    if (base?.acceptsPreviewSuffix) return base;
  }
  return undefined;
}

export function previewAliases(model: ModelSpec): string[] {
  return model.acceptsPreviewSuffix ? [model.id + PREVIEW_SUFFIX] : [];
}

/** Models the synchronous text API serves. */
export function isServedAsText(model: ModelSpec): boolean {
  return model.kind === "text" || model.kind === "multimodal_realtime";
}
