import type { OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { FastifyReply } from "fastify";
import { serverTimingHeader } from "./edge/observe-requests.js";

/**
 * The gateway's one SSE writer, on a hijacked reply with the hooks' headers (CORS, Vary) and Server-Timing. Each write
 * waits while the connection's buffer is full, so a slow reader holds back the producer, not the gateway's memory.
 */
export class SseAnswer {
  private readonly raw: ServerResponse;

  constructor(reply: FastifyReply, headers: OutgoingHttpHeaders) {
    reply.hijack();
    this.raw = reply.raw;
    this.raw.writeHead(200, {
      ...(reply.getHeaders() as OutgoingHttpHeaders),
      ...serverTimingHeader(reply.request),
      "x-accel-buffering": "no",
      ...headers,
    });
  }

  /** Whether the client can still be written to. */
  get open(): boolean {
    return !this.raw.destroyed && !this.raw.writableEnded;
  }

  /** Writes `text`; resolves once the connection has room for more (or is gone). */
  async write(text: string): Promise<void> {
    if (!this.open || this.raw.write(text)) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        this.raw.off("drain", done);
        this.raw.off("close", done);
        resolve();
      };
      this.raw.once("drain", done);
      this.raw.once("close", done);
    });
  }

  /** A comment that keeps proxies from timing the stream out; skipped while the client is behind anyway. */
  comment(text: string): void {
    if (this.open && !this.raw.writableNeedDrain) this.raw.write(`: ${text}\n\n`);
  }

  end(): void {
    if (!this.raw.writableEnded) this.raw.end();
  }
}
