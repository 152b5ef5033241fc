// backends: embedded
import assert from "node:assert/strict";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { VendorClient } from "../../src/adapters/vendor/vendor-client.js";

/*
 * Streams share one event loop: an upstream that sends a whole answer at
 * once must not carry that stream to its end before another stream's first
 * event, which arrived in the same turn, is taken (issue 35, the first
 * event's tail with many streams in flight).
 */
describe("VendorClient streams in flight together", () => {
  const EVENTS = 10;
  let server: Server;
  let origin: string;
  let waiting: ServerResponse[] = [];
  let bothArrived: () => void = () => {};

  const answer = (label: string) =>
    Array.from({ length: EVENTS }, (_, i) => `data: ${JSON.stringify({
      candidates: [{ content: { role: "model", parts: [{ text: `${label}${i}` }] }, index: 0, ...(i === EVENTS - 1 ? { finishReason: "STOP" } : {}) }],
      usageMetadata: { promptTokenCount: 1, candidatesTokenCount: i + 1, totalTokenCount: i + 2 },
    })}\r\n\r\n`).join("");

  before(async () => {
    // In the test's own process: both answers are written in one turn, so both arrive before the client's next read.
    server = createServer((request, response) => {
      request.resume();
      request.on("end", () => {
        waiting.push(response);
        if (waiting.length === 2) bothArrived();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("when two upstreams send their whole answers in the same turn, then the second stream's first event is taken before the first stream's last", async () => {
    waiting = [];
    const arrived = new Promise<void>((resolve) => (bothArrived = resolve));
    const vendor = new VendorClient({ name: "r", baseUrl: origin, apiKey: "k", weight: 1, timeoutMs: 5_000, maxInputImages: 3, models: ["*"] });
    const taken: string[] = [];
    const consume = async (signal: AbortSignal) => {
      for await (const chunk of vendor.streamGenerateContent("text-model", { contents: [] }, signal)) {
        taken.push(String(chunk.candidates?.[0]?.content?.parts?.[0]?.text));
      }
    };
    try {
      const streams = [consume(new AbortController().signal), consume(new AbortController().signal)];
      await arrived;
      const [first, second] = waiting;
      for (const [response, label] of [[first!, "a"], [second!, "b"]] as const) {
        response.writeHead(200, { "content-type": "text/event-stream" });
        response.end(answer(label));
      }
      await Promise.all(streams);
    } finally {
      vendor.close();
    }
    assert.equal(taken.length, 2 * EVENTS);
    const firstLabel = taken[0]!.charAt(0);
    const other = firstLabel === "a" ? "b" : "a";
    assert.ok(
      taken.indexOf(`${other}0`) < taken.indexOf(`${firstLabel}${EVENTS - 1}`),
      `the other stream's first event came after this one's last: ${taken.join(" ")}`,
    );
  });
});
