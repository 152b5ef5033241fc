import type { TokenUsage } from "../../domain/pricing/quotes.js";
import { ProviderError, type GenerationProvider, type TextChunk } from "../../ports/provider.js";
import type { Telemetry, UpstreamOperation } from "../../ports/telemetry.js";
import { inSpan, SpanKind } from "./tracing.js";

/**
 * A provider with one route of its own (the simulator), reported as the
 * upstream route `route`: calls, failures, latency, tokens, and a client span
 * per call. A provider with routes (the vendor's) reports per route itself.
 */
export function observedUpstream(provider: GenerationProvider, telemetry: Telemetry, route: string): GenerationProvider {
  const report = (operation: UpstreamOperation, started: number, error: unknown, usage?: TokenUsage) => {
    // A refusal (a blocked prompt) is an answer: the upstream worked.
    const outcome = error === undefined || error instanceof ProviderError ? "ok" : "error";
    telemetry.observe({ kind: "upstream_call", route, operation, outcome, seconds: (performance.now() - started) / 1000 });
    if (usage) telemetry.observe({ kind: "upstream_tokens", route, input: usage.promptTokens, output: usage.textOutputTokens + usage.videoOutputTokens });
  };
  const whole = <T extends { readonly usage: TokenUsage }>(operation: UpstreamOperation, call: () => Promise<T>) =>
    inSpan(`upstream ${operation}`, { kind: SpanKind.CLIENT, attributes: { "upstream.route": route } }, async () => {
      const started = performance.now();
      try {
        const output = await call();
        report(operation, started, undefined, output.usage);
        return output;
      } catch (error) {
        report(operation, started, error);
        throw error;
      }
    });
  return {
    planRoute: (model) => provider.planRoute(model),
    routes: () => provider.routes(),
    close: () => provider.close?.() ?? Promise.resolve(),
    generateImage: (request, signal) => whole("image", () => provider.generateImage(request, signal)),
    generateVideo: (request, signal) => whole("video", () => provider.generateVideo(request, signal)),
    generateText: (request, signal) => whole("text", () => provider.generateText(request, signal)),
    async *streamText(request, signal): AsyncIterable<TextChunk> {
      const started = performance.now();
      let usage: TokenUsage | undefined;
      let failure: unknown;
      try {
        for await (const chunk of provider.streamText(request, signal)) {
          usage = chunk.usage;
          yield chunk;
        }
      } catch (error) {
        failure = error;
        throw error;
      } finally {
        report("text", started, failure, usage);
      }
    },
  };
}
