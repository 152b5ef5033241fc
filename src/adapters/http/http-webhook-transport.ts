import type { WebhookAttemptResult, WebhookTransport } from "../../ports/webhook-transport.js";
import { guardedRequest } from "./guarded-request.js";

const MAX_RESPONSE_BYTES = 64 * 1024;

export class HttpWebhookTransport implements WebhookTransport {
  constructor(private readonly allowPrivate: boolean) {}

  async post(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<WebhookAttemptResult> {
    try {
      const response = await guardedRequest(url, {
        method: "POST", headers, body, timeoutMs, maxBytes: MAX_RESPONSE_BYTES, allowPrivate: this.allowPrivate,
      });
      return { status: response.status };
    } catch (error) {
      return { error: (error as Error).message };
    }
  }
}
