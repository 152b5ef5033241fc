import type { ModelSpec } from "../domain/catalog/models.js";
import type { TokenUsage } from "../domain/pricing/quotes.js";

export interface InputImage {
  readonly mimeType: string;
  readonly bytes: Uint8Array;
}

export interface MediaRequest {
  readonly model: ModelSpec;
  /** The route assigned at acceptance (tried first), when the provider has routes. */
  readonly route?: string;
  readonly prompt: string;
  readonly aspectRatio?: string;
  readonly resolution?: string;
  readonly durationSeconds?: number;
  readonly inputImages: readonly InputImage[];
}

export interface TextRequest {
  readonly model: ModelSpec;
  readonly route?: string;
  /**
   * The caller's request in the vendor's JSON, when it came through the vendor
   * surface, rebuilt from the allow-list of priced fields (contents,
   * systemInstruction, the allowed generationConfig fields: see
   * src/domain/text/upstream-body.ts), so a real upstream gets what the
   * caller asked for and nothing unpriced; the simulator reads promptText.
   */
  readonly wire?: Record<string, unknown>;
  readonly promptText: string;
  /** Prompt tokens beyond promptText's that the request carries (declarations, a response schema), by our rule. */
  readonly extraPromptTokens?: number;
  /** The whole output bound the upstream is held to: the answer's allowance plus the thinking reserved. */
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

/** A function call the model asks for (the vendor's FunctionCall). */
export interface FunctionCallPart {
  readonly id?: string;
  readonly name: string;
  readonly args: Record<string, unknown>;
}

/** One part of an answer, in the order the upstream produced them. */
export type AnswerPart =
  | { readonly kind: "text"; readonly text: string; readonly thought?: boolean; readonly thoughtSignature?: Uint8Array }
  | { readonly kind: "function_call"; readonly call: FunctionCallPart; readonly thoughtSignature?: Uint8Array };

/**
 * A piece of a streamed answer. `text` is its answer text (thoughts
 * excluded); `parts`, when set, is all of it as the upstream produced it
 * (text, thought text, function calls); without `parts` the piece is `text`
 * alone. `usage` is cumulative up to this chunk.
 */
export interface TextChunk {
  readonly text: string;
  readonly parts?: readonly AnswerPart[];
  readonly usage: TokenUsage;
  readonly finishReason?: string;
}

/**
 * Every code a provider's failure or refusal carries: a job's error code, and
 * the reason of a synchronous call's upstream failure (502 on REST).
 */
export const PROVIDER_FAILURES = [
  "no_route", "upstream_rejected", "upstream_unavailable", "upstream_interrupted", "empty_response",
  "prompt_blocked", "output_blocked", "generation_failed", "input_too_large", "missing_input_images",
] as const;

export type ProviderFailure = (typeof PROVIDER_FAILURES)[number];

/** A provider refused or failed: the job fails with `code`, nothing is charged. */
export class ProviderError extends Error {
  constructor(
    readonly code: ProviderFailure,
    message: string,
    /** For refusals: the provider's block or finish reason (e.g. SAFETY, IMAGE_SAFETY). */
    readonly reason?: string,
  ) {
    super(message);
  }
}

/** Where a request will go, decided when it is accepted. */
export interface RoutePlan {
  /** Route name, when the provider has routes. */
  readonly route?: string;
  /** Input images the route accepts: the limit validation applies. */
  readonly maxInputImages: number;
}

/** A route and its health, for operators. */
export interface RouteStatus {
  readonly name: string;
  readonly baseUrl: string;
  readonly models: readonly string[];
  readonly weight: number;
  readonly timeoutMs: number;
  readonly maxInputImages: number;
  readonly paused: boolean;
  readonly healthy: boolean;
  readonly requests: number;
  readonly failures: number;
  readonly consecutiveFailures: number;
  readonly lastError?: string;
  readonly lastErrorAt?: Date;
  readonly lastSuccessAt?: Date;
}

/** Where generations come from: the built-in simulator or the vendor's API. */
export interface GenerationProvider {
  /** Chooses the route of a new request (and so its input-image limit). */
  planRoute(model: ModelSpec): Promise<RoutePlan>;
  /** Routes and their health; empty for a provider without routes. */
  routes(): Promise<RouteStatus[]>;
  /** Releases what the provider holds (threads, connections). */
  close?(): Promise<void>;
  generateImage(request: MediaRequest, signal: AbortSignal): Promise<GenerationOutput>;
  generateVideo(request: MediaRequest, signal: AbortSignal): Promise<GenerationOutput>;
  streamText(request: TextRequest, signal: AbortSignal): AsyncIterable<TextChunk>;
  /** The whole answer in one call (a non-streamed request): its refusals are thrown as streamText throws them. */
  generateText(request: TextRequest, signal: AbortSignal): Promise<TextChunk>;
}
