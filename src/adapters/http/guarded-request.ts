import { lookup, type LookupAddress, type LookupOptions } from "node:dns";
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import type { LookupFunction } from "node:net";
import { isPublicAddress, literalAddress } from "./address-policy.js";

export interface GuardedResponse {
  readonly status: number;
  readonly contentType: string;
  readonly body: Buffer;
}

/** Resolves a host name to every address it has (the system resolver by default). */
export type Resolve = (hostname: string, options: LookupOptions) => Promise<readonly LookupAddress[]>;

export interface GuardedRequestOptions {
  readonly method: "GET" | "POST";
  readonly headers?: Record<string, string>;
  readonly body?: string;
  /** The whole exchange, redirects included. */
  readonly timeoutMs: number;
  readonly maxBytes: number;
  readonly allowPrivate: boolean;
  readonly signal?: AbortSignal;
  /**
   * GET only: redirects to the same origin followed, at most this many; a
   * redirect to another origin fails. 0 (the default): a redirect is the answer.
   */
  readonly maxRedirects?: number;
  /** How host names are resolved; every answer is checked, at connect time, before the connection uses it. */
  readonly resolve?: Resolve;
}

export type FetchFailure =
  | "invalid_url" | "blocked" | "timeout" | "too_large" | "refused" | "unresolved" | "unreachable"
  | "closed" | "tls" | "protocol" | "redirect" | "status" | "network";

/**
 * Why an outbound request failed. `message` is public: it names no address,
 * port, resolution result or system error, so it may be shown to whoever
 * supplied the URL. `detail` is for operators.
 */
export class GuardedRequestError extends Error {
  override name = "GuardedRequestError";
  constructor(
    readonly failure: FetchFailure,
    message: string,
    readonly detail: string = message,
    readonly status?: number,
  ) {
    super(message);
  }

  /** The reason in public terms (what job error messages may carry). */
  get publicReason(): string {
    return this.message;
  }
}

const NOT_ALLOWED = "the address is not allowed";
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

const systemResolve: Resolve = (hostname, options) =>
  new Promise((resolve, reject) => {
    lookup(hostname, { ...options, all: true }, (error, addresses) => (error ? reject(error) : resolve(addresses)));
  });

/** The connection's own DNS lookup, refusing non-public answers, so a rebinding name cannot slip through. */
function guardedLookup(allowPrivate: boolean, resolve: Resolve): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, options).then(
      (answers) => {
        if (answers.length === 0) {
          return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), "", 0);
        }
        const blocked = allowPrivate ? undefined : answers.find((answer) => !isPublicAddress(answer.address));
        if (blocked) return callback(new GuardedRequestError("blocked", NOT_ALLOWED, `${hostname} resolves to ${blocked.address}`), "", 0);
        if (options.all) return callback(null, [...answers]);
        callback(null, answers[0]!.address, answers[0]!.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, "", 0),
    );
  };
}

export const duration = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);

const tooLarge = (maxBytes: number, detail: string) => new GuardedRequestError("too_large", `larger than the ${maxBytes}-byte limit`, detail);

/** A system or parser error in public terms. */
function classify(error: unknown): GuardedRequestError {
  if (error instanceof GuardedRequestError) return error;
  const code = String((error as NodeJS.ErrnoException)?.code ?? "");
  const detail = `${code ? `${code}: ` : ""}${(error as Error)?.message ?? String(error)}`;
  if (code === "ECONNREFUSED") return new GuardedRequestError("refused", "the connection was refused", detail);
  if (["ENOTFOUND", "EAI_AGAIN", "EAI_NONAME", "EAI_NODATA", "EAI_FAIL", "ENODATA"].includes(code)) {
    return new GuardedRequestError("unresolved", "the host name could not be resolved", detail);
  }
  if (["EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ETIMEDOUT", "EAFNOSUPPORT", "EHOSTDOWN", "ENETDOWN"].includes(code)) {
    return new GuardedRequestError("unreachable", "the server could not be reached", detail);
  }
  if (["ECONNRESET", "EPIPE", "ECONNABORTED"].includes(code)) {
    return new GuardedRequestError("closed", "the connection was closed before the answer was complete", detail);
  }
  if (code.startsWith("HPE_")) return new GuardedRequestError("protocol", "the answer was not valid HTTP", detail);
  if (/^(ERR_TLS_|ERR_SSL_)|CERT|SELF_SIGNED|UNABLE_TO_|EPROTO/.test(code)) {
    return new GuardedRequestError("tls", "the TLS connection could not be established", detail);
  }
  return new GuardedRequestError("network", "the connection failed", detail);
}

function parseTarget(target: string): URL {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new GuardedRequestError("invalid_url", "the URL is not a valid http or https URL", "the URL does not parse");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new GuardedRequestError("invalid_url", "the URL is not a valid http or https URL", `scheme ${url.protocol}`);
  }
  return url;
}

/** Reads a body up to `maxBytes`; a declared length is checked first and, when it fits, read into one buffer. */
function readBody(response: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const header = response.headers["content-length"];
    const declared = header === undefined ? undefined : Number(header);
    if (declared !== undefined && declared > maxBytes) {
      response.destroy();
      return reject(tooLarge(maxBytes, `content-length ${declared}`));
    }
    const whole = declared !== undefined && Number.isSafeInteger(declared) ? Buffer.allocUnsafe(declared) : undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    response.on("data", (chunk: Buffer) => {
      if (size + chunk.length > maxBytes) return response.destroy(tooLarge(maxBytes, `more than ${maxBytes} bytes arrived`));
      if (whole) chunk.copy(whole, size);
      else chunks.push(chunk);
      size += chunk.length;
    });
    response.on("error", reject);
    response.on("end", () => resolve(whole ? whole.subarray(0, size) : Buffer.concat(chunks, size)));
    response.on("close", () => {
      if (!response.complete) reject(new GuardedRequestError("closed", "the connection was closed before the answer was complete", "body cut short"));
    });
  });
}

type Exchange = { readonly response: GuardedResponse } | { readonly location: string };

function exchange(url: URL, options: GuardedRequestOptions, signal: AbortSignal, followRedirects: boolean): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const literal = literalAddress(url.hostname);
    if (literal !== undefined && !options.allowPrivate && !isPublicAddress(literal)) {
      return reject(new GuardedRequestError("blocked", NOT_ALLOWED, `${url.hostname} is not a public address`));
    }
    const client = url.protocol === "https:" ? https : http;
    const request = client.request(
      url,
      {
        method: options.method,
        headers: options.headers,
        lookup: guardedLookup(options.allowPrivate, options.resolve ?? systemResolve),
        signal,
        // A fresh connection each time: a pooled one would skip the lookup, and with it the check.
        agent: false,
      },
      (response) => {
        response.on("error", reject);
        const status = response.statusCode ?? 0;
        const location = response.headers.location;
        if (followRedirects && REDIRECT_STATUSES.has(status) && location) {
          response.destroy();
          return resolve({ location });
        }
        readBody(response, options.maxBytes).then(
          (body) => resolve({ response: { status, contentType: String(response.headers["content-type"] ?? "application/octet-stream"), body } }),
          reject,
        );
      },
    );
    request.on("error", reject);
    request.end(options.body);
  });
}

/**
 * One outbound HTTP request to a URL someone else chose: address-guarded,
 * bounded in time and size, and following no redirect unless asked to (then
 * only within the first URL's origin, so credentials never travel elsewhere
 * and no redirect can lead to a private address through another host).
 * Failures are GuardedRequestErrors with a public message.
 */
export async function guardedRequest(target: string, options: GuardedRequestOptions): Promise<GuardedResponse> {
  const first = parseTarget(target);
  const maxRedirects = options.method === "GET" ? (options.maxRedirects ?? 0) : 0;
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, options.timeoutMs);
  const onAbort = () => controller.abort(options.signal?.reason);
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    let url = first;
    for (let hop = 0; ; hop++) {
      const answer = await exchange(url, options, controller.signal, maxRedirects > 0);
      if ("response" in answer) return answer.response;
      let next: URL;
      try {
        next = new URL(answer.location, url);
      } catch {
        throw new GuardedRequestError("redirect", "it redirected to an invalid URL", `Location ${answer.location}`);
      }
      if (next.origin !== first.origin) {
        throw new GuardedRequestError("redirect", "it redirected to another origin, which is not followed", `redirect to ${next.origin}`);
      }
      if (hop >= maxRedirects) throw new GuardedRequestError("redirect", `it redirected more than ${maxRedirects} times`, `stopped at ${next.pathname}`);
      url = next;
    }
  } catch (error) {
    if (timedOut) throw new GuardedRequestError("timeout", `timed out after ${duration(options.timeoutMs)}`, `no complete answer within ${options.timeoutMs} ms`);
    if (options.signal?.aborted) throw options.signal.reason ?? error;
    throw classify(error);
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }
}
