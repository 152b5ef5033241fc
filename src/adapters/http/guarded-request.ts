import http from "node:http";
import https from "node:https";
import { checkLiteralHost, guardedLookup } from "./address-policy.js";

export interface GuardedResponse {
  readonly status: number;
  readonly contentType: string;
  readonly body: Buffer;
}

export interface GuardedRequestOptions {
  readonly method: "GET" | "POST";
  readonly headers?: Record<string, string>;
  readonly body?: string;
  readonly timeoutMs: number;
  readonly maxBytes: number;
  readonly allowPrivate: boolean;
  readonly signal?: AbortSignal;
}

/**
 * One outbound HTTP request to a client-supplied URL: address-guarded, bounded
 * in time and size, and never following redirects (a redirect could lead to a
 * private address; Standard Webhooks also counts 3xx as failure).
 */
export function guardedRequest(target: string, options: GuardedRequestOptions): Promise<GuardedResponse> {
  return new Promise((resolve, reject) => {
    const url = new URL(target);
    checkLiteralHost(url.hostname, options.allowPrivate);
    const client = url.protocol === "https:" ? https : http;
    const request = client.request(
      url,
      {
        method: options.method,
        headers: options.headers,
        lookup: guardedLookup(options.allowPrivate),
        timeout: options.timeoutMs,
        signal: options.signal,
      },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > options.maxBytes) {
            request.destroy(new Error(`response larger than ${options.maxBytes} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        response.on("end", () =>
          resolve({
            status: response.statusCode ?? 0,
            contentType: String(response.headers["content-type"] ?? "application/octet-stream"),
            body: Buffer.concat(chunks),
          }),
        );
        response.on("error", reject);
      },
    );
    const deadline = setTimeout(() => request.destroy(new Error(`no complete answer within ${options.timeoutMs} ms`)), options.timeoutMs);
    request.on("close", () => clearTimeout(deadline));
    request.on("timeout", () => request.destroy(new Error(`no answer within ${options.timeoutMs} ms`)));
    request.on("error", reject);
    request.end(options.body);
  });
}
