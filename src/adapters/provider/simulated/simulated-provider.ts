import { setTimeout as sleep } from "node:timers/promises";
import { imagePixelSize, videoFrameSize } from "../../../domain/catalog/output-size.js";
import { countTokens } from "../../../domain/text/tokens.js";
import {
  ProviderError, type GenerationOutput, type GenerationProvider, type MediaRequest, type RoutePlan, type RouteStatus,
  type AnswerPart, type TextChunk, type TextRequest,
} from "../../../ports/provider.js";
import { renderMp4 } from "./render-mp4.js";
import { renderPng } from "./render-png.js";
import { RenderPool } from "./render-pool.js";
import { schemaInstance } from "./schema-instance.js";
import { chunkAnswer, simulatedAnswer, simulatedThought, truncateToTokens, wireOf } from "./simulated-text.js";

/**
 * Markers a prompt may contain to steer the simulator, so every outcome of a
 * real provider can be produced on demand (documented in docs/api.md, "Simulated provider").
 */
export const SIMULATOR_MARKERS = {
  fail: "[simulate:fail]",
  blocked: "[simulate:blocked]",
  textOnly: "[simulate:text-only]",
  withText: "[simulate:with-text]",
  slow: "[simulate:slow]",
  function: "[simulate:function]",
} as const;

export interface SimulatedProviderOptions {
  /** Time an image or video takes, and the time a text answer is spread over. */
  readonly latencyMs: number;
  /** Input images per request (the simulator has one route: the default limit). */
  readonly maxInputImages: number;
  /** Worker threads that render images and videos; 0 renders on the event loop. */
  readonly renderThreads: number;
}

function refuseOnMarkers(prompt: string): void {
  if (prompt.includes(SIMULATOR_MARKERS.fail)) throw new ProviderError("generation_failed", "the simulated provider failed as asked");
  if (prompt.includes(SIMULATOR_MARKERS.blocked)) {
    throw new ProviderError("prompt_blocked", "the prompt was blocked by the provider's safety filter (SAFETY)", "SAFETY");
  }
}

export class SimulatedProvider implements GenerationProvider {
  private readonly pool?: RenderPool;

  constructor(private readonly options: SimulatedProviderOptions) {
    if (options.renderThreads > 0) this.pool = new RenderPool(options.renderThreads);
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }

  async planRoute(): Promise<RoutePlan> {
    return { maxInputImages: this.options.maxInputImages };
  }

  async routes(): Promise<RouteStatus[]> {
    return [];
  }

  async generateImage(request: MediaRequest, signal: AbortSignal): Promise<GenerationOutput> {
    await this.wait(request.prompt, signal);
    refuseOnMarkers(request.prompt);
    const usage = { promptTokens: countTokens(request.prompt), textOutputTokens: 0, videoOutputTokens: 0 };
    const caption = simulatedAnswer(request.model.id, request.prompt);
    if (request.prompt.includes(SIMULATOR_MARKERS.textOnly)) {
      return { text: caption, usage: { ...usage, textOutputTokens: countTokens(caption) } };
    }
    const { width, height } = imagePixelSize(request.aspectRatio, request.resolution ?? "1K");
    const seed = `${request.model.id}\n${request.prompt}\n${request.inputImages.length}`;
    const bytes = this.pool ? await this.pool.png({ width, height, seed }) : renderPng({ width, height, seed });
    signal.throwIfAborted();
    const media = { bytes, mimeType: "image/png" };
    const text = request.prompt.includes(SIMULATOR_MARKERS.withText) ? caption : undefined;
    return { media, text, usage: { ...usage, textOutputTokens: text ? countTokens(text) : 0 } };
  }

  async generateVideo(request: MediaRequest, signal: AbortSignal): Promise<GenerationOutput> {
    await this.wait(request.prompt, signal);
    refuseOnMarkers(request.prompt);
    const { width, height } = videoFrameSize(request.aspectRatio, request.resolution ?? "720p");
    const options = { width, height, durationSeconds: request.durationSeconds ?? 4, seed: request.prompt };
    const bytes = this.pool ? await this.pool.mp4(options) : await renderMp4(options);
    signal.throwIfAborted();
    return {
      media: { bytes, mimeType: "video/mp4" },
      usage: { promptTokens: countTokens(request.prompt), textOutputTokens: 0, videoOutputTokens: 0 },
    };
  }

  /**
   * The answer to a text request: a call of the first declared function when the last turn asks for one with
   * `[simulate:function]`, a minimal instance of a JSON response schema, or the simulated prose; preceded by a
   * thought when thinking is asked (shown when includeThoughts is). Usage counts exactly what is returned.
   */
  async *streamText(request: TextRequest, signal: AbortSignal): AsyncIterable<TextChunk> {
    refuseOnMarkers(request.promptText);
    const wire = wireOf(request.wire);
    const promptTokens = countTokens(request.promptText) + (request.extraPromptTokens ?? 0);
    const thinking = wire.thinking && truncateToTokens(simulatedThought(request.promptText), Math.min(wire.thinking.budget, request.maxOutputTokens));
    const thoughtTokens = thinking ? countTokens(thinking.text) : 0;
    const thought = thinking && wire.thinking!.include ? [{ kind: "text" as const, text: thinking.text, thought: true }] : [];
    const usageOf = (output: string) => ({
      promptTokens, textOutputTokens: thoughtTokens + countTokens(output), videoOutputTokens: 0, ...(thoughtTokens > 0 ? { thoughtTokens } : {}),
    });
    const call = request.promptText.includes(SIMULATOR_MARKERS.function) ? wire.functionCall(SIMULATOR_MARKERS.function) : undefined;
    if (call) {
      await this.wait(request.promptText, signal);
      yield { text: "", parts: [...thought, { kind: "function_call", call }], usage: usageOf(JSON.stringify(call)), finishReason: "STOP" };
      return;
    }
    const answer = wire.jsonSchema !== undefined
      ? JSON.stringify(schemaInstance(wire.jsonSchema))
      : simulatedAnswer(request.model.id, request.promptText);
    const { text, truncated } = truncateToTokens(answer, request.maxOutputTokens - thoughtTokens);
    const chunks = chunkAnswer(text);
    const pause = Math.floor(this.latencyFor(request.promptText) / Math.max(1, chunks.length));
    let soFar = "";
    for (const [index, chunk] of chunks.entries()) {
      if (pause > 0) await sleep(pause, undefined, { signal });
      signal.throwIfAborted();
      soFar += chunk;
      const last = index === chunks.length - 1;
      yield {
        text: chunk,
        ...(index === 0 && thought.length > 0 ? { parts: [...thought, { kind: "text" as const, text: chunk }] } : {}),
        usage: usageOf(soFar),
        finishReason: last ? (truncated ? "MAX_TOKENS" : "STOP") : undefined,
      };
    }
  }

  async generateText(request: TextRequest, signal: AbortSignal): Promise<TextChunk> {
    let text = "";
    const parts: AnswerPart[] = [];
    let last: TextChunk | undefined;
    for await (const chunk of this.streamText(request, signal)) {
      text += chunk.text;
      parts.push(...(chunk.parts ?? [{ kind: "text", text: chunk.text }]));
      last = chunk;
    }
    const usage = last?.usage ?? { promptTokens: countTokens(request.promptText), textOutputTokens: 0, videoOutputTokens: 0 };
    // Plain text stays one text part; thoughts and calls keep their own parts.
    const structured = parts.some((p) => p.kind === "function_call" || p.thought);
    const joined = structured ? joinText(parts) : undefined;
    return { text, ...(joined ? { parts: joined } : {}), usage, finishReason: last?.finishReason };
  }

  private latencyFor(prompt: string): number {
    return prompt.includes(SIMULATOR_MARKERS.slow) ? Math.max(this.options.latencyMs, 2000) * 5 : this.options.latencyMs;
  }

  private async wait(prompt: string, signal: AbortSignal): Promise<void> {
    const ms = this.latencyFor(prompt);
    if (ms > 0) await sleep(ms, undefined, { signal });
  }
}

/** Adjacent answer-text parts as one, as a whole answer has them. */
function joinText(parts: readonly AnswerPart[]): AnswerPart[] {
  const joined: AnswerPart[] = [];
  for (const part of parts) {
    const previous = joined[joined.length - 1];
    if (part.kind === "text" && !part.thought && previous?.kind === "text" && !previous.thought) {
      joined[joined.length - 1] = { kind: "text", text: previous.text + part.text };
    } else joined.push(part);
  }
  return joined;
}
