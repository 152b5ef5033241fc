import { imagePromptTokens, mediaPromptTokens, type InlineMedia } from "./media-tokens.js";

/**
 * The token-counting rule of this service when it has to count itself (the
 * estimate at creation, and the simulated provider): one token per started
 * 4 bytes of UTF-8. Real upstreams report their own counts, which win.
 */
export function countTokens(text: string): number {
  const bytes = Buffer.byteLength(text, "utf8");
  return Math.ceil(bytes / 4);
}

/**
 * What an input image of unknown size may cost in prompt tokens, for
 * reservations (see media-tokens.ts: a 4096×4096 image by the vendor's tile
 * rule). An image whose dimensions are known is counted from them instead.
 */
export const IMAGE_PROMPT_TOKEN_ALLOWANCE = imagePromptTokens(undefined);

/**
 * Prompt tokens to reserve for: the text by our rule plus what each inline
 * media part may cost by the vendor's rules (see media-tokens.ts), or, given a
 * number, that many images of unknown size. A media type that is not accepted
 * counts nothing here: validation refuses it first.
 */
export function promptTokenEstimate(text: string, media: readonly InlineMedia[] | number = []): number {
  if (typeof media === "number") return countTokens(text) + media * IMAGE_PROMPT_TOKEN_ALLOWANCE;
  return media.reduce((sum, part) => sum + (mediaPromptTokens(part) ?? 0), countTokens(text));
}
