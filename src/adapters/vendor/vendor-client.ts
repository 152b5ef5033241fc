import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { createParser } from "eventsource-parser";
import type { Route } from "../../domain/routing/routes.js";
import { ProviderError } from "../../ports/provider.js";
import { guardedRequest, GuardedRequestError } from "../http/guarded-request.js";
import { UpstreamError } from "./upstream-error.js";
import type { VendorOperation, VendorResponse } from "./vendor-response.js";

const API_VERSION = "v1beta";
const KEY_HEADER = "x-vendor-api-key";
/** Same-origin redirects a video download follows. */
const VIDEO_REDIRECT_HOPS = 5;

/** How upstream video files are downloaded. */
export interface VideoDownloadOptions {
  /** UPSTREAM_VIDEO_MAX_BYTES. */
  readonly maxBytes: number;
  /** ALLOW_PRIVATE_URLS, for links to an origin other than the route's. */
  readonly allowPrivate: boolean;
}

export const DEFAULT_VIDEO_DOWNLOAD: VideoDownloadOptions = { maxBytes: 512 * 1024 * 1024, allowPrivate: false };

/** Why a stream's own signal is aborted when it is over: one shared reason (an abort without one builds a DOMException per stream). */
const STREAM_OVER = new Error("the stream is over");

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
  // node:http fails an aborted request with an AbortError whose cause is the signal's reason (here, the call's time limit).
  const reason = (error as Error)?.name === "AbortError" ? ((error as { cause?: unknown }).cause ?? error) : error;
  if ((reason as Error)?.name === "TimeoutError") return new UpstreamError("timeout", `${route.name}: ${what} timed out after ${route.timeoutMs} ms`);
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  return new UpstreamError("connect", `${route.name}: ${what} failed: ${cause?.code ?? cause?.message ?? (error as Error).message}`);
}

/** What an error answer's body is read up to: enough for the vendor's error JSON. */
const MAX_ERROR_BODY = 64 * 1024;

/** An answer's body as text (an error answer's up to MAX_ERROR_BODY; the rest is dropped with the connection). */
async function textOf(response: IncomingMessage, limit = Infinity): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    size += chunk.length;
    if (size > limit) {
      response.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).toString("utf8");
}

async function failIfNotOk(response: IncomingMessage, route: Route, what: string): Promise<void> {
  const status = response.statusCode ?? 0;
  if (status >= 200 && status <= 299) return;
  const body = await textOf(response, MAX_ERROR_BODY).catch(() => "");
  let message = body.slice(0, 300);
  try {
    message = (JSON.parse(body) as { error?: { message?: string } }).error?.message ?? message;
  } catch {
    // not JSON: keep the raw text
  }
  throw new UpstreamError("http", `${route.name}: ${what} answered ${status}: ${message}`, status);
}

async function json<T>(response: IncomingMessage, route: Route, what: string): Promise<T> {
  const text = await textOf(response);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new UpstreamError("malformed", `${route.name}: ${what} answered a body that is not JSON`);
  }
}

/**
 * The `data` of each SSE event of an answer, taken one at a time as the
 * parser finds them in what arrives ('data' events; reading pauses while
 * parsed events wait to be taken). Reading a response with `for await` made
 * an async iterator's promises per piece that arrived (decision 0023). A response that closes before its end fails
 * the next take, as the iterator's premature close did.
 *
 * When one piece carries several events, only its first is taken at once: the
 * rest wait one turn of the event loop, so that other streams' pieces that
 * arrived in the same turn are handled first. Without it, a stream whose
 * upstream sent its whole answer at once was carried to its end before the
 * next stream's first event left (issue 35: with 32 streams in flight, the
 * first event's added p99 fell from 10 to 5 ms).
 */
class SseEvents {
  private readonly waiting: string[] = [];
  /** Whether an event of the last piece was taken already (the next one of it yields first). */
  private takenOfPiece = false;
  private ended = false;
  private failure: Error | undefined;
  private wake: (() => void) | undefined;

  /** `arrived`: called for each piece of the body that arrives (the stall timer's refresh). */
  constructor(private readonly response: IncomingMessage, arrived: () => void) {
    const parser = createParser({ onEvent: (event) => this.waiting.push(event.data) });
    response.setEncoding("utf8");
    response.on("data", (text: string) => {
      arrived();
      this.takenOfPiece = false;
      parser.feed(text);
      if (this.waiting.length > 0) {
        response.pause();
        this.notify();
      }
    });
    response.once("end", () => {
      this.ended = true;
      this.notify();
    });
    response.once("error", (error: Error) => {
      this.failure ??= error;
      this.notify();
    });
    response.once("close", () => {
      if (!this.ended) this.failure ??= new Error("the answer closed before its end");
      this.notify();
    });
  }

  /** The next event's data; undefined once the answer has ended. */
  async next(): Promise<string | undefined> {
    for (;;) {
      if (this.takenOfPiece && this.waiting.length > 0) {
        this.takenOfPiece = false;
        await new Promise<void>((resolve) => setImmediate(resolve));
        continue;
      }
      const data = this.waiting.shift();
      if (data !== undefined) {
        this.takenOfPiece = true;
        if (this.waiting.length === 0 && this.response.isPaused()) this.response.resume();
        return data;
      }
      if (this.failure) throw this.failure;
      if (this.ended) return undefined;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

/** A path a URL carries unchanged: characters it never escapes in a path or query, and no dot segment. */
const PLAIN_PATH = /^(?:[A-Za-z0-9\-_~!$&'()*+,;=:@/%?]|\.(?![./]|$))*$/;

/**
 * A request path as a URL would carry it: ours are escaped already (the fast
 * path); a name an upstream gave back goes through a URL (escaped, its
 * fragment dropped, dot segments resolved), as when every call parsed one.
 */
const requestPath = (path: string) => (PLAIN_PATH.test(path) ? path : (({ pathname, search }) => pathname + search)(new URL(path, "http://upstream")));

/**
 * One route of the vendor's public REST API (authenticated with
 * `x-vendor-api-key`). Calls go through node:http on a keep-alive pool of
 * the route's own, not fetch: the issue-13 profile of a text stream found
 * fetch's WHATWG request and body streams a third of its CPU.
 */
export class VendorClient {
  private readonly agent: http.Agent;
  private readonly transport: typeof http | typeof https;
  /** The route's base URL taken apart once: a request is made from these and its path, without parsing a URL per call. */
  private readonly target: { readonly protocol: string; readonly hostname: string; readonly port: string; readonly basePath: string; readonly auth?: string };

  constructor(
    readonly route: Route,
    private readonly videoDownload: VideoDownloadOptions = DEFAULT_VIDEO_DOWNLOAD,
  ) {
    const base = new URL(route.baseUrl);
    this.transport = base.protocol === "https:" ? https : http;
    // An IPv6 literal's brackets belong to the URL, not to the address to connect to.
    const hostname = base.hostname.startsWith("[") ? base.hostname.slice(1, -1) : base.hostname;
    this.target = {
      protocol: base.protocol, hostname, port: base.port, basePath: `${base.pathname.replace(/\/+$/, "")}/${API_VERSION}/`,
      // Credentials in the base URL go as Basic auth, as a request made from the URL sends them.
      ...(base.username || base.password ? { auth: `${decodeURIComponent(base.username)}:${decodeURIComponent(base.password)}` } : {}),
    };
    // Connections kept open between calls (idle ones do not hold the process open), newest reused first.
    this.agent = new this.transport.Agent({ keepAlive: true, scheduling: "lifo" });
  }

  /** One exchange with the route: resolves with the answer's head; its body is read by the caller. `signal` aborts either. */
  private exchange(method: "GET" | "POST", path: string, body: unknown, signal: AbortSignal): Promise<IncomingMessage> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string | number> = { [KEY_HEADER]: this.route.apiKey };
    if (payload !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = Buffer.byteLength(payload);
    }
    return new Promise((resolve, reject) => {
      const { protocol, hostname, port, basePath, auth } = this.target;
      const request = this.transport.request({ protocol, hostname, port, auth, path: requestPath(basePath + path), method, headers, agent: this.agent, signal }, resolve);
      request.on("error", reject); // every error (a later abort too) is handled: reject is a no-op once settled
      request.end(payload);
    });
  }

  private post(path: string, body: unknown, signal: AbortSignal): Promise<IncomingMessage> {
    return this.exchange("POST", path, body, signal);
  }

  /** Closes the route's idle connections. */
  close(): void {
    this.agent.destroy();
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
    // The call's own signal: the caller's abort, a stall, or the stream's end (one listener; AbortSignal.any's
    // weak references cost the garbage collector on every stream).
    const local = new AbortController();
    const onAbort = () => local.abort(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    /** Whether the upstream answered 2xx: a failure after that broke a stream that had begun. */
    let answering = false;
    // One timer, pushed back by each piece that arrives (refresh: no timer made per chunk).
    const stallTimer = setTimeout(
      () => local.abort(new UpstreamError("stalled", `${this.route.name}: ${what} sent nothing for ${this.route.timeoutMs} ms`)),
      this.route.timeoutMs,
    );
    try {
      const response = await this.post(`models/${encodeURIComponent(model)}:streamGenerateContent?alt=sse`, body, local.signal);
      await failIfNotOk(response, this.route, what);
      answering = true;
      const events = new SseEvents(response, () => stallTimer.refresh());
      let finished = false;
      for (let data = await events.next(); data !== undefined; data = await events.next()) {
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
      // The last chunk carries the finish reason (or the block): a stream that ends without one was cut short.
      if (!finished) throw new UpstreamError("dropped", `${this.route.name}: ${what} ended before its last chunk`);
    } catch (error) {
      if (local.signal.aborted && !signal.aborted) throw local.signal.reason; // a stall
      if (answering && !(error instanceof UpstreamError) && !signal.aborted) {
        throw new UpstreamError("dropped", `${this.route.name}: ${what}: the connection broke (${(error as Error).message})`);
      }
      throw classify(error, signal, this.route, what);
    } finally {
      clearTimeout(stallTimer);
      signal.removeEventListener("abort", onAbort);
      local.abort(STREAM_OVER); // closes the upstream request if the consumer stopped early
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
        const response = await this.exchange("GET", name, undefined, callSignal);
        await failIfNotOk(response, this.route, what);
        return json<VendorOperation>(response, this.route, what);
      });
    } catch (error) {
      throw classify(error, signal, this.route, what);
    }
  }

  /**
   * Downloads the video file the vendor links to. Only a link on the route's
   * own origin gets the key; a link elsewhere is fetched without it, through
   * the same address guard as client URLs. Redirects are followed within the
   * link's origin only (a few hops), so the key never travels to another
   * origin, and the file is bounded by UPSTREAM_VIDEO_MAX_BYTES. A refused
   * address, a cross-origin redirect or an oversized file fails the job; a
   * connection fault or a 5xx is retried like any upstream call.
   */
  async download(uri: string, signal: AbortSignal): Promise<{ bytes: Uint8Array; mimeType: string }> {
    let url: URL;
    try {
      url = new URL(uri);
    } catch {
      throw new UpstreamError("malformed", `${this.route.name}: the operation's video link is not a URL`);
    }
    const own = url.origin === new URL(this.route.baseUrl).origin;
    try {
      const response = await guardedRequest(url.href, {
        method: "GET",
        headers: own ? { [KEY_HEADER]: this.route.apiKey } : {},
        timeoutMs: this.route.timeoutMs,
        maxBytes: this.videoDownload.maxBytes,
        // The route's origin is the operator's choice; any other origin is judged like a client's URL.
        allowPrivate: own || this.videoDownload.allowPrivate,
        maxRedirects: VIDEO_REDIRECT_HOPS,
        signal,
      });
      if (response.status < 200 || response.status > 299) {
        throw new UpstreamError("http", `${this.route.name}: the video download answered HTTP ${response.status}`, response.status);
      }
      // Without a (specific) content type the file is what the operation produced: a video.
      const type = response.contentType.split(";")[0]!.trim();
      return { bytes: response.body, mimeType: type && type !== "application/octet-stream" ? type : "video/mp4" };
    } catch (error) {
      if (error instanceof UpstreamError) throw error;
      if (signal.aborted) throw signal.reason ?? error;
      if (!(error instanceof GuardedRequestError)) throw classify(error, signal, this.route, "the video download");
      switch (error.failure) {
        case "timeout":
          throw new UpstreamError("timeout", `${this.route.name}: the video download ${error.message}`);
        case "blocked":
        case "redirect":
        case "too_large":
        case "invalid_url":
          throw new ProviderError("upstream_rejected", `the upstream video could not be downloaded: ${error.message}`);
        default:
          throw new UpstreamError("connect", `${this.route.name}: the video download failed: ${error.message}`);
      }
    }
  }
}
