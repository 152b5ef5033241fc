/**
 * What inline media can cost in prompt tokens, for reservations: an upper
 * bound by the vendor's documented rules, so that a reservation covers what
 * the upstream will count. The upstream's own count is what is charged (and a
 * settlement never charges beyond hold + available: see
 * domain/pricing/settlement.ts).
 *
 * Images (ai.google.dev/gemini-api/docs/tokens; .../media-resolution):
 *  - tiles: an image with both sides ≤ 384 px is 258 tokens; a larger one is
 *    cropped and scaled into 768×768 tiles of 258 tokens each;
 *  - media resolution (Gemini 3): a fixed count per image whatever its size,
 *    280 / 560 / 1120 / 2240 for LOW / MEDIUM / HIGH (the default) / ULTRA_HIGH.
 *  The reservation takes the larger of the tile count (from the image's real
 *  dimensions, read from its header) and the highest per-image count (2240).
 *  An image whose dimensions cannot be read (an unknown format, or a URL the
 *  jobs API fetches only later) is assumed to be 4096×4096, the largest size
 *  this service generates: 36 tiles, 9288 tokens.
 *
 * Other media, by decoded size (their duration or page count is not read):
 *  - audio is 32 tokens per second and video 263 tokens per second (258 per
 *    frame at 1 frame per second plus 32 for its audio track; at most 280 per
 *    frame + 32 at Gemini 3's HIGH resolution). One token per 8 bytes covers
 *    audio down to 256 bytes/s (2 kbit/s) and video down to 2.5 KB/s
 *    (20 kbit/s), below what any supported codec produces at a useful quality;
 *  - text documents (text/*, JSON, XML) are text: at most one token per byte.
 *  Any other media type (PDF pages, for instance, whose count of pages is not
 *  read) is refused.
 */

/** Tokens of one 768×768 tile, and of an image with both sides ≤ 384 px. */
export const TOKENS_PER_IMAGE_TILE = 258;
export const IMAGE_TILE_SIDE = 768;
export const SMALL_IMAGE_SIDE = 384;
/** The highest documented per-image count (Gemini 3, MEDIA_RESOLUTION_ULTRA_HIGH). */
export const MAX_TOKENS_PER_IMAGE_AT_MEDIA_RESOLUTION = 2240;
/** Assumed dimensions of an image whose header cannot be read. */
export const UNKNOWN_IMAGE_SIDE = 4096;
/** Audio and video: one token per this many decoded bytes at most. */
export const AV_BYTES_PER_TOKEN = 8;

export interface ImageSize {
  readonly width: number;
  readonly height: number;
}

/** Prompt tokens an image of this size may cost (see above). */
export function imagePromptTokens(size: ImageSize | undefined): number {
  const { width, height } = size ?? { width: UNKNOWN_IMAGE_SIDE, height: UNKNOWN_IMAGE_SIDE };
  const tiles =
    width <= SMALL_IMAGE_SIDE && height <= SMALL_IMAGE_SIDE
      ? 1
      : Math.ceil(width / IMAGE_TILE_SIDE) * Math.ceil(height / IMAGE_TILE_SIDE);
  return Math.max(tiles * TOKENS_PER_IMAGE_TILE, MAX_TOKENS_PER_IMAGE_AT_MEDIA_RESOLUTION);
}

/** How a media type is counted; undefined when it is not accepted. */
export type MediaKind = "image" | "audio_video" | "text";

const TEXT_TYPES = /^(text\/[a-z0-9.+-]+|application\/(json|xml|x-javascript|x-python|x-typescript))$/;

export function mediaKindOf(mimeType: string): MediaKind | undefined {
  const type = mimeType.toLowerCase().split(";")[0]!.trim();
  if (type.startsWith("image/")) return "image";
  if (type.startsWith("audio/") || type.startsWith("video/")) return "audio_video";
  if (TEXT_TYPES.test(type)) return "text";
  return undefined;
}

/** One inline media part as the reservation sees it: its type, decoded size and (images) header bytes. */
export interface InlineMedia {
  readonly mimeType: string;
  readonly bytes: number;
  /** The first bytes of the data (enough for an image header); absent for a URL not fetched yet. */
  readonly head?: Uint8Array;
}

/** Prompt tokens one inline media part may cost; undefined for a media type that is not accepted. */
export function mediaPromptTokens(media: InlineMedia): number | undefined {
  switch (mediaKindOf(media.mimeType)) {
    case "image":
      return imagePromptTokens(media.head && imageSizeOf(media.head));
    case "audio_video":
      return Math.ceil(media.bytes / AV_BYTES_PER_TOKEN);
    case "text":
      return media.bytes;
    default:
      return undefined;
  }
}

/** Bytes of base64 to decode for an image's header: JPEG metadata (EXIF, ICC) may come before its size. */
export const IMAGE_HEAD_BYTES = 1024 * 1024;

/**
 * Width and height from an image's header (PNG, JPEG, GIF, WebP, BMP);
 * undefined when the format is not recognised or the header is cut short.
 */
export function imageSizeOf(head: Uint8Array): ImageSize | undefined {
  const b = head;
  const u16be = (i: number) => (b[i]! << 8) | b[i + 1]!;
  const u16le = (i: number) => b[i]! | (b[i + 1]! << 8);
  const u24le = (i: number) => b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16);
  const u32be = (i: number) => ((b[i]! << 24) >>> 0) + ((b[i + 1]! << 16) | (b[i + 2]! << 8) | b[i + 3]!);
  const i32le = (i: number) => b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24);
  const ascii = (i: number, n: number) => String.fromCharCode(...b.subarray(i, i + n));
  const sized = (width: number, height: number) => (width > 0 && height > 0 ? { width, height } : undefined);

  if (b.length >= 24 && b[0] === 0x89 && ascii(1, 3) === "PNG" && ascii(12, 4) === "IHDR") return sized(u32be(16), u32be(20));
  if (b.length >= 10 && (ascii(0, 6) === "GIF87a" || ascii(0, 6) === "GIF89a")) return sized(u16le(6), u16le(8));
  if (b.length >= 26 && ascii(0, 2) === "BM") return sized(Math.abs(i32le(18)), Math.abs(i32le(22)));
  if (b.length >= 30 && ascii(0, 4) === "RIFF" && ascii(8, 4) === "WEBP") {
    const chunk = ascii(12, 4);
    if (chunk === "VP8 ") return sized(u16le(26) & 0x3fff, u16le(28) & 0x3fff);
    if (chunk === "VP8L") {
      const [b0, b1, b2, b3] = [b[21]!, b[22]!, b[23]!, b[24]!];
      return sized(1 + (((b1 & 0x3f) << 8) | b0), 1 + (((b3 & 0x0f) << 10) | (b2 << 2) | ((b1 & 0xc0) >> 6)));
    }
    if (chunk === "VP8X") return sized(1 + u24le(24), 1 + u24le(27));
    return undefined;
  }
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xd8) {
    // JPEG: walk the marker segments to the first start-of-frame.
    let i = 2;
    while (i + 9 < b.length) {
      if (b[i] !== 0xff) return undefined;
      const marker = b[i + 1]!;
      if (marker === 0xff) {
        i++; // fill byte
        continue;
      }
      if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
        i += 2; // markers without a length
        continue;
      }
      const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
      if (isFrame) return sized(u16be(i + 7), u16be(i + 5));
      i += 2 + u16be(i + 2);
    }
  }
  return undefined;
}

/** Decodes the first IMAGE_HEAD_BYTES of a base64 payload, without decoding the whole of it. */
export function base64Head(base64: string): Uint8Array {
  const chars = Math.ceil(IMAGE_HEAD_BYTES / 3) * 4;
  return Buffer.from(base64.length > chars ? base64.slice(0, chars) : base64, "base64");
}
