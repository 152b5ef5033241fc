/**
 * Aspect ratios. The spec shows only some values; the full set below is the
 * vendor's image set plus the extreme panoramas the newer models accept.
 * The fast image model accepts the classic subset only.
 */
export const AUTO = "auto";

export const FULL_ASPECT_RATIOS = [
  "1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9",
  "1:4", "4:1", "1:8", "8:1", AUTO,
] as const;

export const FAST_MODEL_ASPECT_RATIOS = [
  "1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9", AUTO,
] as const;

export const VIDEO_ASPECT_RATIOS = ["16:9", "9:16", AUTO] as const;

/** Width/height of a ratio such as "16:9"; "auto" is treated as square. */
export function ratioParts(ratio: string): { w: number; h: number } {
  if (ratio === AUTO) return { w: 1, h: 1 };
  const [w, h] = ratio.split(":").map(Number);
  return { w: w!, h: h! };
}
