import type { InputFetcher } from "../../ports/input-fetcher.js";
import { guardedRequest } from "./guarded-request.js";

export class HttpInputFetcher implements InputFetcher {
  constructor(private readonly options: { allowPrivate: boolean; timeoutMs: number }) {}

  async fetch(url: string, signal: AbortSignal, maxBytes: number): Promise<{ bytes: Uint8Array; mimeType: string }> {
    const response = await guardedRequest(url, { method: "GET", signal, maxBytes, ...this.options });
    if (response.status < 200 || response.status > 299) throw new Error(`GET ${url} answered ${response.status}`);
    return { bytes: response.body, mimeType: response.contentType.split(";")[0]!.trim() };
  }
}
