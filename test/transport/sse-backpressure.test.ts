// backends: embedded
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { once } from "node:events";
import { after, before, describe, it } from "node:test";
import Fastify, { type FastifyInstance } from "fastify";
import { SseAnswer } from "../../src/transport/http/sse.js";
import { eventually } from "../support/harness.js";

/*
 * The gateway's SSE writer waits while a client's connection is full: a
 * client that stops reading holds back the producer of its events, and the
 * gateway's memory does not take what the client has not read.
 */
const EVENT = `data: ${"x".repeat(64 * 1024)}\r\n\r\n`;
const EVENTS = 2_000; // 128 MiB in all: far more than the socket buffers on both sides hold

describe("an SSE answer to a client that stops reading", () => {
  let app: FastifyInstance;
  let written = 0;
  let finished = false;
  before(async () => {
    app = Fastify();
    app.get("/events", async (_request, reply) => {
      const sse = new SseAnswer(reply, { "content-type": "text/event-stream" });
      for (let i = 0; i < EVENTS && sse.open; i++) {
        await sse.write(EVENT);
        written++;
      }
      finished = true;
      sse.end();
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
  });
  after(() => app.close());

  it("when the client reads nothing, then the producer waits with a bounded amount written; when it reads again, then every event arrives", async () => {
    const socket: Socket = connect((app.server.address() as { port: number }).port, "127.0.0.1");
    await once(socket, "connect");
    socket.pause();
    socket.write("GET /events HTTP/1.1\r\nHost: test\r\n\r\n");
    // The producer stops once the buffers are full, long before the 2,000 events are written.
    const stalled = await eventually(async () => {
      const before = written;
      await new Promise((resolve) => setImmediate(resolve));
      return { before, after: written };
    }, (sample) => sample.after > 0 && sample.after === sample.before && !finished, { what: "the producer to wait for the client" });
    assert.ok(stalled.after < EVENTS / 4, `at most a few buffers' worth written while the client reads nothing (${stalled.after} of ${EVENTS} events)`);
    assert.ok(process.memoryUsage().arrayBuffers < 100 * 1024 * 1024, "the unread events are not held in memory");
    let received = 0;
    socket.on("data", (chunk: Buffer) => (received += chunk.length));
    socket.resume();
    await eventually(async () => finished, Boolean, { timeoutMs: 30_000, what: "every event to be written" });
    await eventually(async () => received, (bytes) => bytes >= EVENTS * EVENT.length, { timeoutMs: 30_000, what: "every event to arrive" });
    assert.equal(written, EVENTS);
    socket.destroy();
  });
});
