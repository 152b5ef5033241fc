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
  const seen: { method?: string; url?: string; key?: string }[] = [];

  before(async () => {
    server = createServer((request, response) => {
      seen.push({ method: request.method, url: request.url, key: request.headers["x-vendor-api-key"] as string | undefined });
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
});
