import { ratioParts } from "./aspect-ratios.js";

const LONG_SIDE: Record<string, number> = { "1K": 1024, "2K": 2048, "4K": 4096 };

const VIDEO_FRAME: Record<string, { long: number; short: number }> = {
  "720p": { long: 1280, short: 720 },
  "1080p": { long: 1920, short: 1080 },
  "4k": { long: 3840, short: 2160 },
};

/** Even numbers keep the sizes valid for codecs as well. */
const even = (n: number) => Math.max(2, Math.round(n / 2) * 2);

/** Pixel size of an image: the long side follows the resolution, the ratio the other. */
export function imagePixelSize(aspectRatio: string | undefined, resolution: string): { width: number; height: number } {
  const long = LONG_SIDE[resolution] ?? 1024;
  const { w, h } = ratioParts(aspectRatio ?? "1:1");
  return w >= h ? { width: long, height: even((long * h) / w) } : { width: even((long * w) / h), height: long };
}

export function videoFrameSize(aspectRatio: string | undefined, resolution: string): { width: number; height: number } {
  const frame = VIDEO_FRAME[resolution] ?? VIDEO_FRAME["720p"]!;
  return aspectRatio === "9:16" ? { width: frame.short, height: frame.long } : { width: frame.long, height: frame.short };
}
