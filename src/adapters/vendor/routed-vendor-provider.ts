import { setTimeout as sleep } from "node:timers/promises";
import pRetry from "p-retry";
import type { ModelSpec } from "../../domain/catalog/models.js";
import { orderRoutes, routesForModel, type Route } from "../../domain/routing/routes.js";
import {
  ProviderError, type GenerationOutput, type GenerationProvider, type InputImage, type MediaRequest, type RoutePlan,
  type RouteStatus, type TextChunk, type TextRequest,
} from "../../ports/provider.js";
import type { TokenUsage } from "../../domain/pricing/quotes.js";
import { countTokens } from "../../domain/text/tokens.js";
import { RouteHealth } from "./route-health.js";
import { noTelemetry, type Telemetry, type UpstreamOperation } from "../../ports/telemetry.js";
import { inSpan, SpanKind } from "../observability/tracing.js";
import { UpstreamError } from "./upstream-error.js";
import { VendorClient, type VideoDownloadOptions } from "./vendor-client.js";
import { answerPartsOf, chunkText, interpret, refusalOf, usageOf, videoOf, type VendorResponse } from "./vendor-response.js";

export interface RoutedVendorProviderOptions {
  readonly routes: readonly Route[];
  /** Route names an operator paused (shared settings, so every process agrees). */
  readonly pausedRoutes: () => Promise<ReadonlySet<string>>;
  readonly pollIntervalMs: number;
  /** Calls, failures and latency per route; failovers; route health; tokens. */
  readonly telemetry?: Telemetry;
  readonly random?: () => number;
  /** Size cap and address policy of video downloads (default: 512 MiB, private addresses refused off the route's origin). */
  readonly videoDownload?: VideoDownloadOptions;
}

const imageParts = (images: readonly InputImage[]) =>
  images.map((image) => ({ inlineData: { mimeType: image.mimeType, data: Buffer.from(image.bytes).toString("base64") } }));

/** The vendor's body for a job: the prompt and its images as one user turn. */
function contentsOf(prompt: string, images: readonly InputImage[]) {
  return [{ role: "user", parts: [{ text: prompt }, ...imageParts(images)] }];
}

/** A text request's upstream body: whatever the caller sent, the upstream is held to the output bound the reservation assumed. */
function textBody(request: TextRequest) {
  return request.wire
    ? { ...request.wire, generationConfig: { ...(request.wire.generationConfig as object | undefined), maxOutputTokens: request.maxOutputTokens } }
    : { contents: contentsOf(request.promptText, request.inputImages), generationConfig: { maxOutputTokens: request.maxOutputTokens } };
}

/** The prompt by our rule, for an upstream that reports no usage: its text and what it carries beyond (declarations, a schema). */
const promptTokensOf = (request: TextRequest) => countTokens(request.promptText) + (request.extraPromptTokens ?? 0);

/**
 * The vendor's API as the provider, across routes. A call goes to the route
 * chosen at acceptance (or drawn by weight), and on a connect error, a 5xx, a
 * 429, a broken body or a timeout it fails over to the next route that can
 * take the request, until one answers or the caller's deadline (the job's
 * `timeout`) ends it. A stream fails over only before its first chunk.
 */
export class RoutedVendorProvider implements GenerationProvider {
  private readonly health = new RouteHealth();
  private readonly clients: Map<string, VendorClient>;
  private readonly random: () => number;

  constructor(private readonly options: RoutedVendorProviderOptions) {
    this.clients = new Map(options.routes.map((route) => [route.name, new VendorClient(route, options.videoDownload)]));
    this.random = options.random ?? Math.random;
  }

  /** Closes every route's idle upstream connections. */
  async close(): Promise<void> {
    for (const client of this.clients.values()) client.close();
  }

  private async order(model: ModelSpec, imageCount: number, preferred?: string): Promise<Route[]> {
    const candidates = routesForModel(this.options.routes, model.id);
    const ordered = orderRoutes(candidates, {
      paused: await this.options.pausedRoutes(), unhealthy: this.health.unhealthy(), imageCount, preferred, random: this.random,
    });
    if (ordered.length === 0) {
      throw new ProviderError("no_route", `no active upstream route serves ${model.id}${imageCount ? ` with ${imageCount} input images` : ""}`);
    }
    return ordered;
  }

  async planRoute(model: ModelSpec): Promise<RoutePlan> {
    const [route] = await this.order(model, 0).catch(() => [] as Route[]);
    // With no active route the request is still validated (against the largest limit) and fails in the job.
    const limit = route?.maxInputImages ?? Math.max(0, ...routesForModel(this.options.routes, model.id).map((r) => r.maxInputImages));
    return { route: route?.name, maxInputImages: limit };
  }

  async routes(): Promise<RouteStatus[]> {
    const paused = await this.options.pausedRoutes();
    return this.options.routes.map((route) => {
      const health = this.health.snapshot(route.name);
      return {
        name: route.name, baseUrl: route.baseUrl, models: route.models, weight: route.weight, timeoutMs: route.timeoutMs,
        maxInputImages: route.maxInputImages, paused: paused.has(route.name), ...health,
      };
    });
  }

  private get telemetry(): Telemetry {
    return this.options.telemetry ?? noTelemetry;
  }

  /** Records a route's answer (or fault) in its health, and tells the metrics. */
  private answered(route: string, fault?: string): void {
    if (fault === undefined) this.health.succeeded(route);
    else this.health.failed(route, fault);
    this.telemetry.observe({ kind: "route_health", route, healthy: !this.health.unhealthy().has(route) });
  }

  /** Tokens a route reported for one call. */
  private counted(route: string, usage: TokenUsage | undefined): void {
    if (usage) this.telemetry.observe({ kind: "upstream_tokens", route, input: usage.promptTokens, output: usage.textOutputTokens + usage.videoOutputTokens });
  }

  /** One call to one route, timed and in a client span of the current trace. */
  private async attempt<T>(route: string, operation: UpstreamOperation, call: () => Promise<T>): Promise<T> {
    const started = performance.now();
    let outcome: "ok" | "error" = "error";
    try {
      const result = await inSpan(`upstream ${operation}`, { kind: SpanKind.CLIENT, attributes: { "upstream.route": route } }, call);
      outcome = "ok";
      return result;
    } catch (error) {
      if (error instanceof ProviderError) outcome = "ok"; // the route answered; the answer was a refusal
      throw error;
    } finally {
      this.telemetry.observe({ kind: "upstream_call", route, operation, outcome, seconds: (performance.now() - started) / 1000 });
    }
  }

  /** Tries the routes in order; only route faults move on to the next. */
  private async failover<T>(
    routes: Route[], signal: AbortSignal, operation: UpstreamOperation, call: (client: VendorClient) => Promise<T>,
  ): Promise<T> {
    let last: UpstreamError | undefined;
    let previous: string | undefined;
    for (const route of routes) {
      signal.throwIfAborted();
      if (previous !== undefined) this.telemetry.observe({ kind: "upstream_failover", from: previous, to: route.name });
      try {
        const result = await this.attempt(route.name, operation, () => call(this.clients.get(route.name)!));
        this.answered(route.name);
        return result;
      } catch (error) {
        if (!(error instanceof UpstreamError)) {
          if (error instanceof ProviderError) this.answered(route.name); // the route answered; the answer was a refusal
          throw error;
        }
        this.answered(route.name, error.message);
        if (!error.retryable) throw new ProviderError("upstream_rejected", error.message);
        last = error;
        previous = route.name;
      }
    }
    throw new ProviderError("upstream_unavailable", `every upstream route failed; last: ${last?.message}`);
  }

  async generateImage(request: MediaRequest, signal: AbortSignal): Promise<GenerationOutput> {
    const routes = await this.order(request.model, request.inputImages.length, request.route);
    const imageConfig: Record<string, string> = {};
    if (request.aspectRatio) imageConfig.aspectRatio = request.aspectRatio; // "auto": nothing is sent
    if (request.resolution && !request.model.ignoresResolution) imageConfig.imageSize = request.resolution;
    const body = {
      contents: contentsOf(request.prompt, request.inputImages),
      generationConfig: { responseModalities: ["TEXT", "IMAGE"], imageConfig },
    };
    const answer = await this.failover(routes, signal, "image", async (client) => {
      const interpreted = interpret(await client.generateContent(request.model.id, body, signal));
      this.counted(client.route.name, interpreted.usage);
      return interpreted;
    });
    if (!answer.image && !answer.text) throw new ProviderError("empty_response", "the upstream answered without an image or text");
    return { text: answer.text, media: answer.image, usage: answer.usage };
  }

  async generateVideo(request: MediaRequest, signal: AbortSignal): Promise<GenerationOutput> {
    const routes = await this.order(request.model, request.inputImages.length, request.route);
    const parameters: Record<string, unknown> = { durationSeconds: request.durationSeconds ?? 4 };
    if (request.resolution) parameters.resolution = request.resolution;
    if (request.aspectRatio) parameters.aspectRatio = request.aspectRatio;
    const first = request.inputImages[0];
    const instance: Record<string, unknown> = { prompt: request.prompt };
    if (first) instance.image = { bytesBase64Encoded: Buffer.from(first.bytes).toString("base64"), mimeType: first.mimeType };
    // Only starting fails over: once an operation runs at the vendor (and is paid for), polling and
    // download stay on its route and ride out that route's hiccups until the job's deadline.
    const { client, name } = await this.failover(routes, signal, "video", async (client) => ({
      client,
      name: await client.startVideo(request.model.id, { instances: [instance], parameters }, signal),
    }));
    for (;;) {
      const operation = await this.persist(client, signal, () => this.attempt(client.route.name, "video", () => client.getOperation(name, signal)));
      if (operation.done) {
        const video = videoOf(operation);
        const file = "bytes" in video ? { bytes: video.bytes, mimeType: "video/mp4" } : await this.persist(client, signal, () => this.attempt(client.route.name, "video", () => client.download(video.uri, signal)));
        return { media: file, usage: { promptTokens: 0, textOutputTokens: 0, videoOutputTokens: 0 } };
      }
      await sleep(this.options.pollIntervalMs, undefined, { signal });
    }
  }

  /**
   * Retries one route's call through its passing faults (not its refusals), every poll interval,
   * until it answers or the deadline ends it (`signal`: p-retry then rejects with its reason).
   */
  private async persist<T>(client: VendorClient, signal: AbortSignal, call: () => Promise<T>): Promise<T> {
    try {
      return await pRetry(async () => {
        const result = await call();
        this.answered(client.route.name);
        return result;
      }, {
        retries: Infinity,
        minTimeout: this.options.pollIntervalMs,
        factor: 1,
        signal,
        onFailedAttempt: ({ error }) => {
          if (error instanceof UpstreamError) this.answered(client.route.name, error.message);
        },
        shouldRetry: ({ error }) => error instanceof UpstreamError && error.retryable,
      });
    } catch (error) {
      if (error instanceof UpstreamError && !error.retryable) throw new ProviderError("upstream_rejected", error.message);
      throw error;
    }
  }

  /**
   * The whole answer from one generateContent call, failing over like an image: nothing has reached the
   * caller before it returns. The vendor's usage is charged; without it, the answer is counted by our rule.
   */
  async generateText(request: TextRequest, signal: AbortSignal): Promise<TextChunk> {
    const routes = await this.order(request.model, request.inputImages.length, request.route);
    const body = textBody(request);
    return this.failover(routes, signal, "text", async (client) => {
      const answer = await client.generateContent(request.model.id, body, signal);
      const refusal = refusalOf(answer);
      if (refusal) throw refusal;
      const text = chunkText(answer);
      const usage = answer.usageMetadata
        ? usageOf(answer.usageMetadata)
        : { promptTokens: promptTokensOf(request), textOutputTokens: countTokens(text), videoOutputTokens: 0 };
      this.counted(client.route.name, usage);
      const parts = answerPartsOf(answer);
      return { text, ...(parts ? { parts } : {}), usage, finishReason: answer.candidates?.[0]?.finishReason };
    });
  }

  /**
   * Streams text from the first route that produces a first chunk. Once a
   * chunk has been passed on, the stream belongs to that route: a later fault
   * is an error for the caller, never a silent switch to another route.
   */
  async *streamText(request: TextRequest, signal: AbortSignal): AsyncIterable<TextChunk> {
    const routes = await this.order(request.model, request.inputImages.length, request.route);
    const body = textBody(request);
    const opened = await this.failover(routes, signal, "text", async (client) => {
      const stream = client.streamGenerateContent(request.model.id, body, signal);
      const first = await stream.next();
      return { stream, first, route: client.route.name };
    });
    let next = opened.first;
    let textSoFar = "";
    let produced = false;
    let usage: TokenUsage | undefined;
    try {
      while (!next.done) {
        const chunk: VendorResponse = next.value;
        const refusal = refusalOf(chunk);
        // A refusal before any output is the whole answer: uncharged. After output it is just the last chunk.
        if (refusal && (refusal.code === "prompt_blocked" || (refusal.code === "output_blocked" && !produced))) throw refusal;
        const text = chunkText(chunk);
        const parts = answerPartsOf(chunk);
        textSoFar += text;
        produced ||= text !== "" || (parts ?? []).some((p) => p.kind === "function_call");
        // The vendor's usage is cumulative and wins; before it first reports, the output so far is counted by our rule.
        usage = chunk.usageMetadata
          ? usageOf(chunk.usageMetadata)
          : {
            promptTokens: usage?.promptTokens ?? promptTokensOf(request),
            textOutputTokens: countTokens(textSoFar),
            videoOutputTokens: usage?.videoOutputTokens ?? 0,
          };
        yield { text, ...(parts ? { parts } : {}), usage, finishReason: chunk.candidates?.[0]?.finishReason };
        next = await opened.stream.next();
      }
    } catch (error) {
      if (error instanceof UpstreamError) {
        this.answered(opened.route, error.message);
        throw new ProviderError("upstream_interrupted", `${error.message} (after output began; not retried)`);
      }
      throw error;
    } finally {
      this.counted(opened.route, usage);
      await opened.stream.return(undefined);
    }
  }
}
