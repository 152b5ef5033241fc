/** Downloads an input image; throws when it cannot (the job then fails with missing_input_images). */
export interface InputFetcher {
  /** `maxBytes` bounds this one download (what is left of the job's input budget). */
  fetch(url: string, signal: AbortSignal, maxBytes: number): Promise<{ bytes: Uint8Array; mimeType: string }>;
}
