import { once } from "node:events";
import type { OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { FastifyReply } from "fastify";
import { serverTimingHeader } from "./edge/observe-requests.js";

/** The gateway's one SSE writer (hooks' headers, Server-Timing): a slow reader holds back the producer, not the gateway's memory. */
export class SseAnswer {
  private readonly raw: ServerResponse;
  /** Aborted when the connection closes, so that a write waiting for room stops waiting. */
  private readonly closed = new AbortController();

  constructor(reply: FastifyReply, headers: OutgoingHttpHeaders) {
    this.raw = reply.hijack().raw;
    this.raw.writeHead(200, {
      ...(reply.getHeaders() as OutgoingHttpHeaders),
      ...serverTimingHeader(reply.request),
      "x-accel-buffering": "no",
      ...headers,
    });
    this.raw.once("close", () => this.closed.abort());
  }

  /** Whether the client can still be written to. */
  get open(): boolean {
    return !this.raw.destroyed && !this.raw.writableEnded;
  }

  /** Writes `text`; resolves once the connection has room for more (or is gone). */
  async write(text: string): Promise<void> {
    if (!this.open || this.raw.write(text)) return;
    await once(this.raw, "drain", { signal: this.closed.signal }).catch(() => undefined);
  }

  /** A comment that keeps proxies from timing the stream out; skipped while the client is behind anyway. */
  comment(text: string): void {
    if (this.open && !this.raw.writableNeedDrain) this.raw.write(`: ${text}\n\n`);
  }

  end(): void {
    if (!this.raw.writableEnded) this.raw.end();
  }
}
