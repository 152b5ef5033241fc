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
 * What an input image may cost in prompt tokens, for reservations only: the
 * vendor counts 258 tokens per 768×768 tile, and this allows ten tiles (about
 * a 2.3K square image). The upstream's own count is what is charged.
 */
export const IMAGE_PROMPT_TOKEN_ALLOWANCE = 2580;

/** Prompt tokens to reserve for: the text by our rule plus the allowance per input image. */
export function promptTokenEstimate(text: string, imageCount: number): number {
  return countTokens(text) + imageCount * IMAGE_PROMPT_TOKEN_ALLOWANCE;
}
