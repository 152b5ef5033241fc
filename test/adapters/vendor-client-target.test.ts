// backends: embedded
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { VendorClient } from "../../src/adapters/vendor/vendor-client.js";

/*
 * Where a VendorClient sends its requests: the route's base URL (its path
 * prefix kept), the API version, then the call's path. The base URL is taken
 * apart once; a path is not parsed as a URL per call, yet arrives as a URL
 * would have carried it.
 */
describe("VendorClient request targets", () => {
  let server: Server;
  let origin: string;
  const seen: { method?: string; url?: string; key?: string; authorization?: string }[] = [];

  before(async () => {
    server = createServer((request, response) => {
      seen.push({
        method: request.method, url: request.url, key: request.headers["x-vendor-api-key"] as string | undefined,
        ...(request.headers.authorization ? { authorization: request.headers.authorization } : {}),
      });
      request.resume();
      request.on("end", () => {
        response.writeHead(200, { "content-type": "application/json" });
        response.end(JSON.stringify({ name: "operations/op-1", done: false, candidates: [{ content: { parts: [{ text: "hi" }] }, finishReason: "STOP" }] }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const client = (baseUrl: string) =>
    new VendorClient({ name: "r", baseUrl, apiKey: "route-key", weight: 1, timeoutMs: 5_000, maxInputImages: 3, models: ["*"] });

  it("when the base URL has a path prefix, then calls go under it, after the API version, with the route's key", async () => {
    seen.length = 0;
    const vendor = client(`${origin}/gateway/upstream`);
    try {
      await vendor.generateContent("text-model", { contents: [] }, new AbortController().signal);
    } finally {
      vendor.close();
    }
    assert.deepEqual(seen, [{ method: "POST", url: "/gateway/upstream/v1beta/models/text-model:generateContent", key: "route-key" }]);
  });

  it("when a model id needs escaping, then it arrives escaped once", async () => {
    seen.length = 0;
    const vendor = client(origin);
    try {
      await vendor.generateContent("a b/c", { contents: [] }, new AbortController().signal);
    } finally {
      vendor.close();
    }
    assert.equal(seen[0]?.url, "/v1beta/models/a%20b%2Fc:generateContent");
  });

  it("when an operation name given back by the upstream holds characters a URL escapes, then it arrives escaped as a URL would carry it", async () => {
    seen.length = 0;
    const vendor = client(origin);
    try {
      await vendor.getOperation("operations/a b?x=ü", new AbortController().signal);
    } finally {
      vendor.close();
    }
    assert.equal(seen[0]?.url, "/v1beta/operations/a%20b?x=%C3%BC");
  });

  it("when an operation name holds characters a URL changes (braces, a fragment, dot segments), then it arrives as a URL would carry it", async () => {
    seen.length = 0;
    const names = ["operations/a{b}|c\"d<e>`f#fragment", "operations/x/../../y", "operations/./z/.", "operations/a\\b"];
    const vendor = client(origin);
    try {
      for (const name of names) await vendor.getOperation(name, new AbortController().signal);
    } finally {
      vendor.close();
    }
    const asUrl = (name: string) => (({ pathname, search }) => pathname + search)(new URL(`${origin}/v1beta/${name}`));
    assert.deepEqual(seen.map((request) => request.url), names.map(asUrl));
    assert.equal(asUrl(names[0]!), "/v1beta/operations/a%7Bb%7D|c%22d%3Ce%3E%60f", "the fragment dropped, the rest escaped");
  });

  it("when the base URL carries credentials, then they go as Basic auth, as a request made from the URL sends them", async () => {
    seen.length = 0;
    const vendor = client(origin.replace("http://", "http://user%40corp:p%3Ass@"));
    try {
      await vendor.generateContent("m", { contents: [] }, new AbortController().signal);
    } finally {
      vendor.close();
    }
    assert.equal(seen[0]?.authorization, `Basic ${Buffer.from("user@corp:p:ss").toString("base64")}`);
  });
});

/*
 * How a VendorClient reads an SSE answer: each piece that arrives pushes the
 * stall bound back, so a stream longer than the bound is fine while one that
 * goes silent for the bound fails as a stall, and an answer that closes before
 * its last chunk fails as a drop.
 */
describe("VendorClient stream reading", () => {
  let server: Server;
  let origin: string;
  /** How the next stream is answered: events every `gapMs`, then stop (`silentAfter`), cut (`cutAfter`) or finish. */
  let plan: { events: number; gapMs: number; silentAfter?: number; cutAfter?: number } = { events: 1, gapMs: 0 };
  const chunk = (i: number, last: boolean) =>
    `data: ${JSON.stringify({ candidates: [{ content: { parts: [{ text: `w${i} ` }] }, ...(last ? { finishReason: "STOP" } : {}) }] })}\r\n\r\n`;

  before(async () => {
    server = createServer((request, response) => {
      request.resume();
      request.on("end", async () => {
        const { events, gapMs, silentAfter, cutAfter } = plan;
        response.writeHead(200, { "content-type": "text/event-stream" });
        for (let i = 0; i < events; i++) {
          if (i > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
          if (i === silentAfter) return; // keeps the connection open, sends nothing more
          if (i === cutAfter) {
            response.socket?.destroy(); // a gap after the last write: what was written has left
            return;
          }
          response.write(chunk(i, i === events - 1));
        }
        response.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));

  const client = () => new VendorClient({ name: "r", baseUrl: origin, apiKey: "k", weight: 1, timeoutMs: 300, maxInputImages: 0, models: ["*"] });

  /** Reads one stream to its end or its failure: the chunks' texts, and the failure's kind if it failed. */
  async function read() {
    const vendor = client();
    const texts: string[] = [];
    try {
      for await (const response of vendor.streamGenerateContent("m", { contents: [] }, new AbortController().signal)) {
        texts.push(String(response.candidates?.[0]?.content?.parts?.[0]?.text));
      }
      return { texts };
    } catch (error) {
      return { texts, failure: (error as { failure?: string }).failure ?? String(error) };
    } finally {
      vendor.close();
    }
  }

  it("when a stream lasts longer than the stall bound but something arrives within each bound, then it is read whole", async () => {
    plan = { events: 5, gapMs: 150 }; // 600 ms in all, bound 300 ms
    assert.deepEqual(await read(), { texts: ["w0 ", "w1 ", "w2 ", "w3 ", "w4 "] });
  });

  it("when a stream goes silent for the stall bound after some chunks, then reading fails as a stall after those chunks", async () => {
    plan = { events: 5, gapMs: 20, silentAfter: 2 };
    const started = Date.now();
    assert.deepEqual(await read(), { texts: ["w0 ", "w1 "], failure: "stalled" });
    assert.ok(Date.now() - started >= 300, "not before the bound");
  });

  it("when the answer is cut before its last chunk, then reading fails as a drop after the chunks that came", async () => {
    plan = { events: 5, gapMs: 20, cutAfter: 3 };
    assert.deepEqual(await read(), { texts: ["w0 ", "w1 ", "w2 "], failure: "dropped" });
  });
});
