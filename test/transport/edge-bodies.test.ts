// backends: embedded
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ADMIN_TOKEN, call, createCustomer, eventually, startTestService, type Customer, type TestService } from "../support/harness.js";
import { answered, answerOf, drainedOrClosed, openExchange, requestHead, type RawExchange } from "../support/raw-http.js";
import { VENDOR } from "../support/vendor-helpers.js";

const MB150 = 150 * 1024 * 1024;


/** Writes up to `total` body bytes (one reused 1 MiB buffer, with backpressure) until done or the server closes. */
async function sendBody(exchange: RawExchange, total: number): Promise<void> {
  const piece = Buffer.alloc(1024 * 1024, 0x20);
  while (exchange.sent < total && !exchange.closed && !exchange.socket.destroyed) {
    const chunk = piece.subarray(0, Math.min(piece.length, total - exchange.sent));
    exchange.sent += chunk.length;
    if (!exchange.socket.write(chunk)) {
      await drainedOrClosed(exchange.socket);
    }
  }
}


const assertPlatform = (answer: { status: number; json: any } | undefined, status: number, code: string) => {
  assert.equal(answer?.status, status, JSON.stringify(answer));
  assert.equal(answer!.json.error.code, code, JSON.stringify(answer!.json));
};
const assertVendor = (answer: { status: number; json: any } | undefined, status: number, canonical: string, reason: string) => {
  assert.equal(answer?.status, status, JSON.stringify(answer));
  assert.equal(answer!.json.error.code, status);
  assert.equal(answer!.json.error.status, canonical);
  assert.equal(answer!.json.error.details[0].reason, reason);
};

describe("when a client without valid credentials posts a large body", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  const json = { "content-type": "application/json", "content-length": MB150 };
  const cases = [
    { surface: "the jobs API without a key", head: requestHead("POST", "/api/v1/generations", json), vendor: false, code: "missing_api_key" },
    { surface: "the jobs API with an unknown key", head: requestHead("POST", "/api/v1/generations", { ...json, authorization: "Bearer sk_nope" }), vendor: false, code: "invalid_api_key" },
    { surface: "the vendor API with a wrong ?key=", head: requestHead("POST", `${VENDOR}/models/aimodel-3.5-flash:generateContent?key=nope`, json), vendor: true, code: "INVALID_API_KEY" },
    { surface: "the vendor interactions without a key", head: requestHead("POST", `${VENDOR}/interactions`, json), vendor: true, code: "MISSING_API_KEY" },
    {
      surface: "the vendor API with a wrong x-goog-api-key (the vendor SDKs' header)",
      head: requestHead("POST", `${VENDOR}/models/aimodel-3.5-flash:streamGenerateContent?alt=sse`, { ...json, "x-goog-api-key": "nope" }),
      vendor: true,
      code: "INVALID_API_KEY",
    },
    {
      surface: "the vendor countTokens with a wrong x-goog-api-key",
      head: requestHead("POST", `/api/aimodel/v1/models/aimodel-3.5-flash:countTokens`, { ...json, "x-goog-api-key": "nope" }),
      vendor: true,
      code: "INVALID_API_KEY",
    },
    { surface: "admin without the token", head: requestHead("POST", "/admin/v1/accounts", { ...json, authorization: "Bearer wrong" }), vendor: false, code: "invalid_admin_token" },
  ];
  for (const row of cases) {
    it(`then ${row.surface} answers 401 while only the headers were sent`, async () => {
      const exchange = await openExchange(service.url, row.head);
      const answer = await answered(exchange, "the 401");
      assert.equal(exchange.sent, 0, "not a byte of the body was sent");
      if (row.vendor) assertVendor(answer, 401, "UNAUTHENTICATED", row.code);
      else assertPlatform(answer, 401, row.code);
      exchange.socket.destroy();
    });
  }

  it("then three such clients sending 150 MB each do not grow the process by the body size", async (t) => {
    const rss = () => process.memoryUsage().rss;
    const before = rss();
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rss())), 20);
    try {
      const heads = [
        requestHead("POST", "/api/v1/generations", json),
        requestHead("POST", `${VENDOR}/models/aimodel-3.5-flash:streamGenerateContent?alt=sse&key=nope`, json),
        requestHead("POST", `${VENDOR}/interactions`, { ...json, "x-vendor-api-key": "nope" }),
      ];
      const exchanges = await Promise.all(heads.map((head) => openExchange(service.url, head)));
      await Promise.all(exchanges.map((exchange) => sendBody(exchange, MB150)));
      await eventually(async () => exchanges.every((e) => e.closed), Boolean, { timeoutMs: 10_000, what: "the server to close the refused uploads" });
      peak = Math.max(peak, rss());
      const sent = exchanges.map((e) => `${(e.sent / 1024 / 1024).toFixed(0)} MiB`).join(", ");
      t.diagnostic(`RSS ${(before / 1024 / 1024).toFixed(0)} MiB before, peak ${(peak / 1024 / 1024).toFixed(0)} MiB; body bytes the clients got to send: ${sent}`);
      for (const exchange of exchanges) assert.equal(answerOf(exchange)?.status ?? 401, 401, exchange.received.slice(0, 200));
      assert.ok(peak - before < 64 * 1024 * 1024, `RSS grew by ${((peak - before) / 1024 / 1024).toFixed(0)} MiB`);
      // The refused bodies were not read to their end: the connection was cut after a bounded amount.
      for (const exchange of exchanges) assert.ok(exchange.sent < MB150 / 2, `${exchange.sent} bytes were taken`);
    } finally {
      clearInterval(sampler);
    }
  });

  it("then a small refused body is discarded and the connection serves the next request", async () => {
    const body = JSON.stringify({ model: "aimodel-3-pro-image", prompt: "x" });
    const exchange = await openExchange(service.url, requestHead("POST", "/api/v1/generations", { "content-type": "application/json", "content-length": body.length }) + body);
    assertPlatform(await answered(exchange, "the 401"), 401, "missing_api_key");
    exchange.received = "";
    exchange.socket.write(requestHead("GET", "/livez", {}));
    assert.equal((await answered(exchange, "/livez on the same connection")).status, 200);
    exchange.socket.destroy();
  });
});

describe("when a client announces Expect: 100-continue", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service);
  });
  after(() => service.close());

  it("then a refused client is never told to continue, and an accepted one is, and its job is created", async () => {
    const refused = await openExchange(service.url, requestHead("POST", "/api/v1/generations", { "content-type": "application/json", "content-length": 1000, expect: "100-continue" }));
    assertPlatform(await answered(refused, "the 401"), 401, "missing_api_key");
    assert.ok(!refused.received.includes("100 Continue"), refused.received);
    refused.socket.destroy();

    const body = JSON.stringify({ model: "aimodel-2.5-flash-image", prompt: "a kite" });
    const accepted = await openExchange(service.url, requestHead("POST", "/api/v1/generations", {
      "content-type": "application/json", "content-length": body.length, expect: "100-continue", authorization: `Bearer ${customer.apiKey}`,
    }));
    await eventually(async () => accepted.received, (text) => text.startsWith("HTTP/1.1 100 Continue"), { timeoutMs: 5000, what: "100 Continue" });
    accepted.socket.write(body);
    assert.equal((await answered(accepted, "the 202")).status, 202);
    accepted.socket.destroy();
  });
});

describe("when a body is larger than its endpoint accepts", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService({ MAX_BODY_BYTES: "64KiB", MAX_INPUT_BYTES: "1MiB", MAX_PROMPT_BYTES_TEXT: "64KiB", LARGE_UPLOAD_BYTES: "100MiB" });
    customer = await createCustomer(service);
  });
  after(() => service.close());

  it("then an announced Content-Length beyond MAX_BODY_BYTES is refused with 422 input_too_large naming the limit, before the body is sent", async () => {
    const exchange = await openExchange(service.url, requestHead("POST", "/admin/v1/accounts", {
      authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json", "content-length": 65 * 1024,
    }));
    const answer = await answered(exchange, "the 422");
    assertPlatform(answer, 422, "input_too_large");
    assert.match(answer.json.error.message, /64 KiB/);
    assert.equal(exchange.sent, 0);
    exchange.socket.destroy();
  });

  it("then a generation request is allowed its images as base64 plus the rest, and refused beyond, in each surface's shape", async () => {
    // MAX_INPUT_BYTES 1 MiB → 4/3 MiB of base64, plus 6 × (64 KiB prompt + 16 KiB metadata), plus MAX_BODY_BYTES.
    const limit = 4 * Math.ceil((1024 * 1024) / 3) + 6 * (64 * 1024 + 16 * 1024) + 64 * 1024;
    const platform = await openExchange(service.url, requestHead("POST", "/api/v1/generations", {
      authorization: `Bearer ${customer.apiKey}`, "content-type": "application/json", "content-length": limit + 1,
    }));
    const refused = await answered(platform, "the platform 422");
    assertPlatform(refused, 422, "input_too_large");
    assert.match(refused.json.error.message, /1\.9 MiB/);
    platform.socket.destroy();
    const vendor = await openExchange(service.url, requestHead("POST", `${VENDOR}/models/aimodel-3.5-flash:generateContent`, {
      "x-vendor-api-key": customer.apiKey, "content-type": "application/json", "content-length": limit + 1,
    }));
    assertVendor(await answered(vendor, "the vendor 400"), 400, "INVALID_ARGUMENT", "INPUT_TOO_LARGE");
    vendor.socket.destroy();

    // A real 1 MiB image fits (base64, in JSON), well over MAX_BODY_BYTES.
    const image = Buffer.alloc(1024 * 1024, 7).toString("base64");
    const accepted = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey, body: { model: "aimodel-3-pro-image", prompt: "an image", input_images_base64: [image] },
    });
    assert.notEqual(accepted.status, 422, accepted.text);
  });

  it("then a chunked body is refused with 422 once it grows beyond the limit while being read", async () => {
    const exchange = await openExchange(service.url, requestHead("POST", "/admin/v1/accounts", {
      authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json", "transfer-encoding": "chunked",
    }));
    const piece = `${(4096).toString(16)}\r\n${" ".repeat(4096)}\r\n`;
    while (!answerOf(exchange) && !exchange.closed && exchange.sent < 1024 * 1024) {
      exchange.sent += 4096;
      if (!exchange.socket.write(piece)) await drainedOrClosed(exchange.socket);
      await new Promise((resolve) => setImmediate(resolve));
    }
    const answer = await answered(exchange, "the 422");
    assertPlatform(answer, 422, "input_too_large");
    assert.match(answer.json.error.message, /64 KiB/);
    assert.ok(exchange.sent < 256 * 1024, `${exchange.sent} bytes sent before the refusal`);
    exchange.socket.destroy();
  });
});

describe("when more large uploads arrive than MAX_CONCURRENT_LARGE_UPLOADS", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService({ MAX_CONCURRENT_LARGE_UPLOADS: "1", LARGE_UPLOAD_BYTES: "64KiB" });
    customer = await createCustomer(service);
  });
  after(() => service.close());

  /** A valid generation body padded with JSON whitespace to `size` bytes. */
  const padded = (size: number) => {
    const json = JSON.stringify({ model: "aimodel-2.5-flash-image", prompt: "a large upload" });
    return json.slice(0, -1) + " ".repeat(size - json.length) + "}";
  };
  const largeHead = (path: string, extra: Record<string, string | number> = {}) =>
    requestHead("POST", path, { "content-type": "application/json", "content-length": 200 * 1024, ...extra });

  it("then the one beyond is refused with 429 too_many_uploads and Retry-After in its surface's shape, until the slot is given back", async () => {
    // One upload in progress holds the only slot.
    const holder = await openExchange(service.url, largeHead("/api/v1/generations", { authorization: `Bearer ${customer.apiKey}` }));
    holder.socket.write(padded(200 * 1024).slice(0, 1000));
    // Its headers are checked (the key looked up) before the slot is taken: wait for that, or the next one could take it first.
    await eventually(async () => service.running.edge.uploadSlots.inUse, (inUse) => inUse === 1, { timeoutMs: 10_000, what: "the holder to take the slot" });

    const platform = await openExchange(service.url, largeHead("/api/v1/generations", { authorization: `Bearer ${customer.apiKey}` }));
    const refused = await answered(platform, "the platform 429");
    assertPlatform(refused, 429, "too_many_uploads");
    assert.match(refused.headers, /\r\nretry-after: 2\b/i);
    platform.socket.destroy();

    const vendor = await openExchange(service.url, largeHead(`${VENDOR}/interactions`, { "x-vendor-api-key": customer.apiKey }));
    const vendorRefused = await answered(vendor, "the vendor 429");
    assertVendor(vendorRefused, 429, "RESOURCE_EXHAUSTED", "TOO_MANY_UPLOADS");
    assert.match(vendorRefused.headers, /\r\nretry-after: 2\b/i);
    vendor.socket.destroy();

    // Chunked, on a generation route: a large upload too.
    const chunked = await openExchange(service.url, requestHead("POST", "/api/v1/generations", {
      authorization: `Bearer ${customer.apiKey}`, "content-type": "application/json", "transfer-encoding": "chunked",
    }));
    assertPlatform(await answered(chunked, "the chunked 429"), 429, "too_many_uploads");
    chunked.socket.destroy();

    // A small body needs no slot.
    const small = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: { model: "aimodel-2.5-flash-image", prompt: "small" } });
    assert.equal(small.status, 202, small.text);

    // The holder goes away mid-body: its slot comes back.
    holder.socket.destroy();
    const retried = await eventually(
      () => fetch(`${service.url}/api/v1/generations`, {
        method: "POST", headers: { authorization: `Bearer ${customer.apiKey}`, "content-type": "application/json" }, body: padded(200 * 1024),
      }).then(async (response) => ({ status: response.status, text: await response.text() })),
      (response) => response.status !== 429,
      { timeoutMs: 5000, what: "the slot to be given back" },
    );
    assert.equal(retried.status, 202, retried.text);
    // It was given back again when that answer ended: one more large upload gets through at once.
    const again = await fetch(`${service.url}/api/v1/generations`, {
      method: "POST", headers: { authorization: `Bearer ${customer.apiKey}`, "content-type": "application/json" }, body: padded(200 * 1024),
    });
    assert.equal(again.status, 202, await again.text());
  });
});
