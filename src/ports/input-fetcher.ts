/** Downloads an input image; throws when it cannot (the job then fails with missing_input_images). */
export interface InputFetcher {
  fetch(url: string, signal: AbortSignal): Promise<{ bytes: Uint8Array; mimeType: string }>;
}
