import type { InputFetcher } from "../../ports/input-fetcher.js";
import { guardedRequest, GuardedRequestError } from "./guarded-request.js";

/**
 * Fetches input images from the URLs clients give. A failure is a
 * GuardedRequestError whose message is public: the job's error message may
 * carry it (refused address, timeout, HTTP status, size), never an address,
 * port or system error.
 */
export class HttpInputFetcher implements InputFetcher {
  constructor(private readonly options: { allowPrivate: boolean; timeoutMs: number }) {}

  async fetch(url: string, signal: AbortSignal, maxBytes: number): Promise<{ bytes: Uint8Array; mimeType: string }> {
    const response = await guardedRequest(url, { method: "GET", signal, maxBytes, ...this.options });
    if (response.status < 200 || response.status > 299) {
      const redirect = response.status >= 300 && response.status <= 399 ? " (redirects are not followed)" : "";
      throw new GuardedRequestError("status", `the server answered HTTP ${response.status}${redirect}`, `GET answered ${response.status}`, response.status);
    }
    return { bytes: response.body, mimeType: response.contentType.split(";")[0]!.trim() };
  }
}
