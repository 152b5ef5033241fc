/**
 * The token-counting rule of this service when it has to count itself (the
 * estimate at creation, and the simulated provider): one token per started
 * 4 bytes of UTF-8. Real upstreams report their own counts, which win.
 */
export function countTokens(text: string): number {
  const bytes = Buffer.byteLength(text, "utf8");
  return Math.ceil(bytes / 4);
}
