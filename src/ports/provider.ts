import type { ModelSpec } from "../domain/catalog/models.js";
import type { TokenUsage } from "../domain/pricing/quotes.js";

export interface InputImage {
  readonly mimeType: string;
  readonly bytes: Uint8Array;
}

export interface MediaRequest {
  readonly model: ModelSpec;
  readonly prompt: string;
  readonly aspectRatio?: string;
  readonly resolution?: string;
  readonly durationSeconds?: number;
  readonly inputImages: readonly InputImage[];
}

export interface TextRequest {
  readonly model: ModelSpec;
  readonly promptText: string;
  readonly maxOutputTokens: number;
  readonly inputImages: readonly InputImage[];
}

export interface MediaOutput {
  readonly bytes: Uint8Array;
  readonly mimeType: string;
}

export interface GenerationOutput {
  readonly text?: string;
  readonly media?: MediaOutput;
  readonly usage: TokenUsage;
}

/** A piece of a streamed answer. `usage` is cumulative up to this chunk. */
export interface TextChunk {
  readonly text: string;
  readonly usage: TokenUsage;
  readonly finishReason?: string;
}

/** A provider refused or failed: the job fails with `code`, nothing is charged. */
export class ProviderError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

/** Where generations come from: the built-in simulator or the vendor's API. */
export interface GenerationProvider {
  generateImage(request: MediaRequest, signal: AbortSignal): Promise<GenerationOutput>;
  generateVideo(request: MediaRequest, signal: AbortSignal): Promise<GenerationOutput>;
  streamText(request: TextRequest, signal: AbortSignal): AsyncIterable<TextChunk>;
}
