import { createParser } from "eventsource-parser";
import type { Route } from "../../domain/routing/routes.js";
import { UpstreamError } from "./upstream-error.js";
import type { VendorOperation, VendorResponse } from "./vendor-response.js";

const API_VERSION = "v1beta";

class CallTimeoutError extends Error {
  override name = "TimeoutError";
}

/**
 * Runs `work` with a signal that fires when the caller's does or after `ms`.
 * A plain timer, not AbortSignal.timeout: on Node 20 a timeout signal that only
 * AbortSignal.any() holds can be garbage-collected and then never fires.
 */
async function bounded<T>(signal: AbortSignal, ms: number, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal.reason);
  if (signal.aborted) onAbort();
  else signal.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new CallTimeoutError(`timed out after ${ms} ms`)), ms);
  try {
    return await work(controller.signal);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", onAbort);
  }
}

function classify(error: unknown, signal: AbortSignal, route: Route, what: string): unknown {
  if (error instanceof UpstreamError) return error;
  if (signal.aborted) return signal.reason ?? error; // the caller's own abort or deadline: not the route's fault
  if ((error as Error)?.name === "TimeoutError") return new UpstreamError("timeout", `${route.name}: ${what} timed out after ${route.timeoutMs} ms`);
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  return new UpstreamError("connect", `${route.name}: ${what} failed: ${cause?.code ?? cause?.message ?? (error as Error).message}`);
}

async function failIfNotOk(response: Response, route: Route, what: string): Promise<void> {
  if (response.ok) return;
  const body = await response.text().catch(() => "");
  let message = body.slice(0, 300);
  try {
    message = (JSON.parse(body) as { error?: { message?: string } }).error?.message ?? message;
  } catch {
    // not JSON: keep the raw text
  }
  throw new UpstreamError("http", `${route.name}: ${what} answered ${response.status}: ${message}`, response.status);
}

async function json<T>(response: Response, route: Route, what: string): Promise<T> {
  const text = await response.text();
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new UpstreamError("malformed", `${route.name}: ${what} answered a body that is not JSON`);
  }
}

/** One route of the vendor's public REST API (authenticated with `x-vendor-api-key`). */
export class VendorClient {
  constructor(readonly route: Route) {}

  private url(path: string): string {
    return `${this.route.baseUrl}/${API_VERSION}/${path}`;
  }

  private async post(path: string, body: unknown, signal: AbortSignal): Promise<Response> {
    return fetch(this.url(path), {
      method: "POST",
      headers: { "content-type": "application/json", "x-vendor-api-key": this.route.apiKey },
      body: JSON.stringify(body),
      signal,
    });
  }

  async generateContent(model: string, body: unknown, signal: AbortSignal): Promise<VendorResponse> {
    const what = `${model}:generateContent`;
    try {
      return await bounded(signal, this.route.timeoutMs, async (callSignal) => {
        const response = await this.post(`models/${encodeURIComponent(model)}:generateContent`, body, callSignal);
        await failIfNotOk(response, this.route, what);
        return json<VendorResponse>(response, this.route, what);
      });
    } catch (error) {
      throw classify(error, signal, this.route, what);
    }
  }

  /**
   * The SSE stream, one parsed chunk per `data:` event. A stream silent for
   * longer than the route's timeout is a stall; a connection that ends before
   * the last event is a drop.
   */
  async *streamGenerateContent(model: string, body: unknown, signal: AbortSignal): AsyncGenerator<VendorResponse> {
    const what = `${model}:streamGenerateContent`;
    const local = new AbortController();
    const callSignal = AbortSignal.any([signal, local.signal]);
    let stallTimer: NodeJS.Timeout | undefined;
    const armStall = () => {
      clearTimeout(stallTimer);
      stallTimer = setTimeout(() => local.abort(new UpstreamError("stalled", `${this.route.name}: ${what} sent nothing for ${this.route.timeoutMs} ms`)), this.route.timeoutMs);
    };
    try {
      armStall();
      const response = await this.post(`models/${encodeURIComponent(model)}:streamGenerateContent?alt=sse`, body, callSignal);
      await failIfNotOk(response, this.route, what);
      if (!response.body) throw new UpstreamError("malformed", `${this.route.name}: ${what} answered without a body`);
      const events: string[] = [];
      const parser = createParser({ onEvent: (event) => events.push(event.data) });
      const decoder = new TextDecoder();
      let finished = false;
      for await (const bytes of response.body) {
        armStall();
        parser.feed(decoder.decode(bytes as Uint8Array, { stream: true }));
        while (events.length > 0) {
          const data = events.shift()!;
          let chunk: VendorResponse & { error?: { message?: string; code?: number } };
          try {
            chunk = JSON.parse(data);
          } catch {
            throw new UpstreamError("malformed", `${this.route.name}: ${what} sent an event that is not JSON`);
          }
          if (chunk.error) throw new UpstreamError("dropped", `${this.route.name}: ${what} failed mid-stream: ${chunk.error.message ?? chunk.error.code}`);
          if (chunk.candidates?.[0]?.finishReason || chunk.promptFeedback?.blockReason) finished = true;
          yield chunk;
        }
      }
      // The last chunk carries the finish reason (or the block): a stream that ends without one was cut short.
      if (!finished) throw new UpstreamError("dropped", `${this.route.name}: ${what} ended before its last chunk`);
    } catch (error) {
      if (local.signal.aborted) throw local.signal.reason;
      if ((error as { name?: string }).name === "TypeError" && !signal.aborted) {
        throw new UpstreamError("dropped", `${this.route.name}: ${what}: the connection broke (${(error as Error).message})`);
      }
      throw classify(error, signal, this.route, what);
    } finally {
      clearTimeout(stallTimer);
      local.abort(); // closes the upstream request if the consumer stopped early
    }
  }

  async startVideo(model: string, body: unknown, signal: AbortSignal): Promise<string> {
    const what = `${model}:predictLongRunning`;
    try {
      const operation = await bounded(signal, this.route.timeoutMs, async (callSignal) => {
        const response = await this.post(`models/${encodeURIComponent(model)}:predictLongRunning`, body, callSignal);
        await failIfNotOk(response, this.route, what);
        return json<VendorOperation>(response, this.route, what);
      });
      if (!operation.name) throw new UpstreamError("malformed", `${this.route.name}: ${what} answered without an operation name`);
      return operation.name;
    } catch (error) {
      throw classify(error, signal, this.route, what);
    }
  }

  async getOperation(name: string, signal: AbortSignal): Promise<VendorOperation> {
    const what = `GET ${name}`;
    try {
      return await bounded(signal, this.route.timeoutMs, async (callSignal) => {
        const response = await fetch(this.url(name), { headers: { "x-vendor-api-key": this.route.apiKey }, signal: callSignal });
        await failIfNotOk(response, this.route, what);
        return json<VendorOperation>(response, this.route, what);
      });
    } catch (error) {
      throw classify(error, signal, this.route, what);
    }
  }

  /**
   * Downloads a file the vendor serves. Its own file links need the key; a
   * link to any other origin gets no key, so the key never leaks elsewhere.
   */
  async download(uri: string, signal: AbortSignal): Promise<{ bytes: Uint8Array; mimeType: string }> {
    const what = `GET ${uri}`;
    const sameOrigin = new URL(uri).origin === new URL(this.route.baseUrl).origin;
    const headers: Record<string, string> = sameOrigin ? { "x-vendor-api-key": this.route.apiKey } : {};
    try {
      return await bounded(signal, this.route.timeoutMs, async (callSignal) => {
        const response = await fetch(uri, { headers, signal: callSignal });
        await failIfNotOk(response, this.route, what);
        return {
          bytes: new Uint8Array(await response.arrayBuffer()),
          mimeType: (response.headers.get("content-type") ?? "video/mp4").split(";")[0]!.trim(),
        };
      });
    } catch (error) {
      throw classify(error, signal, this.route, what);
    }
  }
}
