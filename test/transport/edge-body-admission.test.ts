// backends: embedded
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { Readable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { ADMIN_TOKEN, createCustomer, eventually, startTestService, type Customer, type TestService } from "../support/harness.js";
import { answered as answeredWithin, answerOf, drainedOrClosed, openExchange, requestHead, type RawExchange } from "../support/raw-http.js";
import { userTurn, VENDOR } from "../support/vendor-helpers.js";

/**
 * What the gateway admits of a body before reading it: the body budget
 * (MAX_BODY_MEMORY), upload slots given back once the body is read, bodies
 * no route reads, media types, and the refusals' bounded discarding. Raw
 * sockets, so a test controls exactly which bytes of a body were sent.
 */

const KIB = 1024;

/** This file's answers come within 5 s unless a test says otherwise. */
const answered = (exchange: RawExchange, what: string, timeoutMs = 5_000) => answeredWithin(exchange, what, timeoutMs);



/** Writes `bytes` (with backpressure) unless the server closed first. */
async function send(exchange: RawExchange, bytes: string | Buffer): Promise<void> {
  if (exchange.closed || exchange.socket.destroyed) return;
  exchange.sent += Buffer.byteLength(bytes);
  if (!exchange.socket.write(bytes)) await drainedOrClosed(exchange.socket);
}

/** A JSON object padded with whitespace to exactly `size` bytes. */
const padded = (value: object, size: number) => {
  const json = JSON.stringify(value);
  assert.ok(json.length <= size);
  return json.slice(0, -1) + " ".repeat(size - json.length) + "}";
};

const assertPlatform = (answer: { status: number; json: any } | undefined, status: number, code: string) => {
  assert.equal(answer?.status, status, JSON.stringify(answer));
  assert.equal(answer!.json.error.code, code, JSON.stringify(answer!.json));
  assert.equal(typeof answer!.json.error.message, "string");
};
const assertVendor = (answer: { status: number; json: any } | undefined, status: number, canonical: string, reason: string) => {
  assert.equal(answer?.status, status, JSON.stringify(answer));
  assert.equal(answer!.json.error.code, status);
  assert.equal(answer!.json.error.status, canonical);
  assert.equal(answer!.json.error.details[0].reason, reason);
};
const retryAfterOf = (answer: { headers: string }) => /\r\nretry-after: (\d+)/i.exec(answer.headers)?.[1];

const generation = (prompt = "an image") => ({ model: "aimodel-2.5-flash-image", prompt });
const json = (length: number, extra: Record<string, string | number> = {}) => ({ "content-type": "application/json", "content-length": length, ...extra });

async function postWhole(service: TestService, path: string, headers: Record<string, string>, body: string) {
  const response = await fetch(`${service.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  return { status: response.status, text: await response.text() };
}

describe("when stalled bodies hold MAX_BODY_MEMORY (256 KiB)", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService({ MAX_BODY_MEMORY: "256KiB", SIMULATED_LATENCY_MS: "200" });
    customer = await createCustomer(service);
  });
  after(() => service.close());
  const bearer = () => ({ authorization: `Bearer ${customer.apiKey}` });

  it("when small bodies of one key stall, then the next body is refused at once with 503 server_busy and Retry-After: 1 in each surface's shape, and taken again once a holder's body arrived or it went away", async () => {
    // Two bodies of 100 KiB (far below LARGE_UPLOAD_BYTES: no upload slot) stall after their first bytes: 200 KiB held.
    const body = padded(generation("held"), 100 * KIB);
    const holders = await Promise.all([0, 1].map(() => openExchange(service.url, requestHead("POST", "/api/v1/generations", json(100 * KIB, bearer())))));
    for (const holder of holders) await send(holder, body.slice(0, 100));
    // Each holder's key is checked before its bytes are taken (a store lookup): wait until both hold theirs.
    await eventually(async () => service.running.edge.bodyBudget.inUse, (inUse) => inUse >= 200 * KIB, { timeoutMs: 10_000, what: "the holders to take 200 KiB" });

    const platform = await openExchange(service.url, requestHead("POST", "/api/v1/generations", json(100 * KIB, bearer())));
    const refused = await answered(platform, "the platform 503");
    assertPlatform(refused, 503, "server_busy");
    assert.equal(retryAfterOf(refused), "1");
    assert.equal(platform.sent, 0, "refused before a byte of its body was sent");
    platform.socket.destroy();

    const vendor = await openExchange(service.url, requestHead("POST", `${VENDOR}/models/aimodel-3.5-flash:generateContent`, json(100 * KIB, { "x-vendor-api-key": customer.apiKey })));
    const vendorRefused = await answered(vendor, "the vendor 503");
    assertVendor(vendorRefused, 503, "UNAVAILABLE", "SERVER_BUSY");
    assert.equal(retryAfterOf(vendorRefused), "1");
    vendor.socket.destroy();

    const admin = await openExchange(service.url, requestHead("POST", "/admin/v1/accounts", json(100 * KIB, { authorization: `Bearer ${ADMIN_TOKEN}` })));
    assertPlatform(await answered(admin, "the admin 503"), 503, "server_busy");
    admin.socket.destroy();

    // What is left (56 KiB) still takes a smaller body.
    const small = await postWhole(service, "/api/v1/generations", bearer(), padded(generation("small"), 40 * KIB));
    assert.equal(small.status, 202, small.text);

    // The first holder's body arrives: its 100 KiB come back and another body of that size is taken.
    await send(holders[0]!, body.slice(100));
    assert.equal((await answered(holders[0]!, "the first holder's 202")).status, 202);
    const next = await postWhole(service, "/api/v1/generations", bearer(), padded(generation("next"), 100 * KIB));
    assert.equal(next.status, 202, next.text);

    // The second holder goes away mid-body: its bytes come back too, so 200 KiB fit again. Two bodies announced
    // together, each told to continue (admitted, and then holding its 100 KiB) or refused: both admitted is 200 KiB.
    holders[1]!.socket.destroy();
    await eventually(
      async () => {
        const stalled = await Promise.all(
          [0, 1].map(() => openExchange(service.url, requestHead("POST", "/api/v1/generations", json(100 * KIB, { ...bearer(), expect: "100-continue" })))),
        );
        const heads = await Promise.all(
          stalled.map((exchange) => eventually(async () => exchange.received, (text) => text.startsWith("HTTP/1.1 "), { timeoutMs: 5_000, what: "an answer to a stalled body" })),
        );
        for (const exchange of stalled) exchange.socket.destroy();
        return heads.some((head) => !head.startsWith("HTTP/1.1 100 "));
      },
      (refusedAny) => !refusedAny,
      { timeoutMs: 5_000, what: "the budget of the holder that went away to come back" },
    );
  });

  it("when a chunked body grows beyond what is left of MAX_BODY_MEMORY, then it is refused with 503 server_busy while it arrives", async () => {
    const holder = await openExchange(service.url, requestHead("POST", "/api/v1/generations", json(200 * KIB, { authorization: `Bearer ${customer.apiKey}` })));
    await send(holder, "{");
    // Wait until the holder is admitted (a 40 KiB body still fits, a 100 KiB one does not).
    await eventually(
      async () => {
        const probe = await openExchange(service.url, requestHead("POST", "/admin/v1/accounts", json(100 * KIB, { authorization: `Bearer ${ADMIN_TOKEN}` })));
        const answer = await answered(probe, "the probe");
        probe.socket.destroy();
        return answer.status;
      },
      (status) => status === 503,
      { timeoutMs: 5_000, what: "the holder to take its 200 KiB" },
    );

    // Chunked: no size to take up front (and on an admin route, MAX_BODY_BYTES 1 MiB would allow it); 56 KiB are left.
    const chunked = await openExchange(service.url, requestHead("POST", "/admin/v1/accounts", {
      authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json", "transfer-encoding": "chunked",
    }));
    const piece = `${(4 * KIB).toString(16)}\r\n${" ".repeat(4 * KIB)}\r\n`;
    while (!answerOf(chunked) && !chunked.closed && chunked.sent < 1024 * KIB) {
      await send(chunked, piece);
      await new Promise((resolve) => setImmediate(resolve));
    }
    const answer = await answered(chunked, "the chunked 503");
    assertPlatform(answer, 503, "server_busy");
    assert.equal(retryAfterOf(answer), "1");
    chunked.socket.destroy();
    holder.socket.destroy();
  });

  it("when a body has been read whole, then its bytes are given back at once, not when its answer (an SSE stream) ends", async () => {
    // The earlier tests' clients went away: their bytes come back once the server saw them go. A body of the
    // whole budget is admitted once they are back (and its own bytes are back once it was read).
    await eventually(async () => service.running.edge.bodyBudget.inUse, (inUse) => inUse === 0, { timeoutMs: 10_000, what: "the whole budget to be free" });
    const controller = new AbortController();
    const stream = await fetch(`${service.url}${VENDOR}/models/aimodel-3.5-flash:streamGenerateContent?alt=sse`, {
      method: "POST",
      headers: { "x-vendor-api-key": customer.apiKey, "content-type": "application/json" },
      body: padded(userTurn("a long answer [simulate:slow]"), 200 * KIB),
      signal: controller.signal,
    });
    try {
      assert.equal(stream.status, 200);
      // The stream goes on for seconds; its 200 KiB body was read before it began, so 100 KiB more fit in 256 KiB.
      const during = await postWhole(service, "/api/v1/generations", { authorization: `Bearer ${customer.apiKey}` }, padded(generation("during"), 100 * KIB));
      assert.equal(during.status, 202, during.text);
    } finally {
      controller.abort();
      await stream.body?.cancel().catch(() => {});
    }
  });
});

describe("when chunked bodies arrive faster than they are parsed (default MAX_BODY_MEMORY)", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service);
  });
  after(() => service.close());

  /** POSTs `pieces` chunked (no Content-Length), as fast as the connection takes them. */
  const postChunked = (path: string, headers: Record<string, string>, pieces: Buffer[]) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const request = httpRequest(new URL(path, service.url), { method: "POST", headers: { "content-type": "application/json", ...headers } }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        response.on("error", reject);
      });
      request.on("error", reject);
      Readable.from(pieces).pipe(request);
    });

  it("when a chunked body has arrived whole before its parser took it all, then it is taken whole, never refused for the bytes it already holds", async () => {
    // 4 MiB of JSON whitespace around a text job: the streamed parser of the jobs route takes it piece by piece.
    const body = Buffer.from(padded(generation("a chunked job"), 4 * 1024 * KIB));
    const pieces = Array.from({ length: 64 }, (_, i) => body.subarray(i * 64 * KIB, (i + 1) * 64 * KIB));
    for (let round = 0; round < 5; round++) {
      const results = await Promise.all([
        postChunked("/api/v1/generations", { authorization: `Bearer ${customer.apiKey}` }, pieces),
        postChunked(`${VENDOR}/models/aimodel-3.5-flash:generateContent`, { "x-vendor-api-key": customer.apiKey }, [
          Buffer.from(padded(userTurn("hello"), 512 * KIB)),
        ]),
      ]);
      assert.equal(results[0].status, 202, results[0].text);
      assert.equal(results[1].status, 200, results[1].text);
    }
  });
});

describe("when a chunked body is refused by its parser while it still arrives (MAX_BODY_MEMORY 24 MiB)", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    // Fields besides images: at most 6 × (1 MiB + 16 KiB) + 1 MiB = 7.1 MiB; the route takes 17.8 MiB.
    service = await startTestService({ MAX_BODY_MEMORY: "24MiB", MAX_INPUT_BYTES: "8MiB" });
    customer = await createCustomer(service, "50.00");
  });
  after(() => service.close());

  /** Whether a 17 MiB body is admitted now (told to continue) rather than refused 503: at most 7 MiB are held. */
  const seventeenMiBAdmitted = async () => {
    const probe = await openExchange(service.url, requestHead("POST", "/api/v1/generations", json(17 * 1024 * KIB, {
      authorization: `Bearer ${customer.apiKey}`, expect: "100-continue",
    })));
    const seen = await eventually(async () => probe.received, (text) => text.startsWith("HTTP/1.1 "), { timeoutMs: 5_000, what: "an answer to the probe" });
    probe.socket.destroy();
    return seen.startsWith("HTTP/1.1 100 ");
  };

  it("when its client writes as fast as it can (8 MiB of fields besides images), then 422 input_too_large, and the bytes it held come back", async () => {
    const head = Buffer.from(`{"model":"aimodel-3-pro-image","prompt":"x","note":"`);
    const filler = Buffer.alloc(64 * KIB, 0x6e);
    const pieces = [head, ...Array.from({ length: 128 }, () => filler), Buffer.from('"}')];
    const refused = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const request = httpRequest(new URL("/api/v1/generations", service.url), {
        method: "POST", headers: { authorization: `Bearer ${customer.apiKey}`, "content-type": "application/json" },
      }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        response.on("error", reject);
      });
      request.on("error", reject);
      Readable.from(pieces).pipe(request);
    });
    assert.equal(refused.status, 422, refused.text);
    assert.equal(JSON.parse(refused.text).error.code, "input_too_large");
    await eventually(seventeenMiBAdmitted, Boolean, { timeoutMs: 5_000, what: "the refused body's bytes to come back" });
  });

  it("when an announced body is refused by its parser mid-way and its client stalls, then the connection is closed after the linger bound, not held for the request timeout", async () => {
    const start = `{"model":"aimodel-3-pro-image","prompt":"x","aspect_ratio":"1:1","resolution":"1K","input_images_base64":["${"A".repeat(64 * KIB)}!!not base64!!`;
    const exchange = await openExchange(service.url, requestHead("POST", "/api/v1/generations", json(8 * 1024 * KIB, { authorization: `Bearer ${customer.apiKey}` })));
    await send(exchange, start);
    assertPlatform(await answered(exchange, "the 422"), 422, "invalid_input_image");
    await eventually(async () => exchange.closed, Boolean, { timeoutMs: 5_000, what: "the server to close the connection" });
    await eventually(seventeenMiBAdmitted, Boolean, { timeoutMs: 5_000, what: "the refused body's bytes to come back" });
  });

  it("when its client goes on sending after the answer, then the rest is discarded within the linger bound, and the bytes it held come back", async () => {
    const exchange = await openExchange(service.url, requestHead("POST", "/api/v1/generations", {
      authorization: `Bearer ${customer.apiKey}`, "content-type": "application/json", "transfer-encoding": "chunked",
    }));
    const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    await send(exchange, chunk(`{"model":"aimodel-3-pro-image","prompt":"x","aspect_ratio":"1:1","resolution":"1K","input_images_base64":["${"A".repeat(64 * KIB)}!!not base64!!`));
    const filler = chunk("A".repeat(256 * KIB));
    while (!exchange.closed && exchange.sent < 64 * 1024 * KIB) {
      await send(exchange, filler);
      if (answerOf(exchange)) break;
    }
    assertPlatform(await answered(exchange, "the 422"), 422, "invalid_input_image");
    for (let i = 0; i < 256 && !exchange.closed; i++) await send(exchange, filler);
    await eventually(async () => exchange.closed, Boolean, { timeoutMs: 5_000, what: "the server to close the connection" });
    assert.ok(exchange.sent < 32 * 1024 * KIB, `${exchange.sent} bytes were taken`);
    await eventually(seventeenMiBAdmitted, Boolean, { timeoutMs: 5_000, what: "the refused body's bytes to come back" });
  });
});

describe("when a large upload's body has been read whole while its answer still streams (MAX_CONCURRENT_LARGE_UPLOADS=1)", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService({ MAX_CONCURRENT_LARGE_UPLOADS: "1", LARGE_UPLOAD_BYTES: "64KiB", SIMULATED_LATENCY_MS: "200" });
    customer = await createCustomer(service);
  });
  after(() => service.close());

  it("when streamGenerateContent's 200 KiB body has been read, then its upload slot is given back and another large upload is taken while the stream goes on", async () => {
    const controller = new AbortController();
    const stream = await fetch(`${service.url}${VENDOR}/models/aimodel-3.5-flash:streamGenerateContent?alt=sse`, {
      method: "POST",
      headers: { "x-vendor-api-key": customer.apiKey, "content-type": "application/json" },
      body: padded(userTurn("a long answer [simulate:slow]"), 200 * KIB),
      signal: controller.signal,
    });
    try {
      assert.equal(stream.status, 200);
      const reader = stream.body!.getReader();
      await reader.read(); // the first event: the stream is under way
      const during = await postWhole(service, "/api/v1/generations", { authorization: `Bearer ${customer.apiKey}` }, padded(generation("during"), 200 * KIB));
      assert.equal(during.status, 202, during.text);
      // The stream is still going: its next event is not its end.
      assert.equal((await reader.read()).done, false);
    } finally {
      controller.abort();
      await stream.body?.cancel().catch(() => {});
    }
  });
});

describe("when a request announces a body that no route reads, or that the route would not take", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService({ MAX_BODY_BYTES: "64KiB" });
    customer = await createCustomer(service);
  });
  after(() => service.close());

  const unrouted = [
    { method: "POST", path: "/nope", vendor: false },
    { method: "PUT", path: "/api/v1/nope", vendor: false },
    { method: "DELETE", path: "/api/v1/generations", vendor: false },
    { method: "PATCH", path: "/admin/v1/accounts", vendor: false },
    { method: "POST", path: `${VENDOR}/nope`, vendor: true },
  ];
  for (const row of unrouted) {
    it(`when ${row.method} ${row.path} announces 48 KiB, then 404 is answered at once in its surface's shape, before a byte of the body was sent`, async () => {
      const exchange = await openExchange(service.url, requestHead(row.method, row.path, json(48 * KIB)));
      const answer = await answered(exchange, "the 404");
      if (row.vendor) assertVendor(answer, 404, "NOT_FOUND", "NOT_FOUND");
      else assertPlatform(answer, 404, "not_found");
      assert.equal(exchange.sent, 0);
      exchange.socket.destroy();
    });
  }

  it("when an unrouted request's small body was sent whole, then it is discarded and the connection serves the next request", async () => {
    const body = JSON.stringify({ any: "thing" });
    const exchange = await openExchange(service.url, requestHead("POST", "/nope", json(body.length)) + body);
    assertPlatform(await answered(exchange, "the 404"), 404, "not_found");
    exchange.received = "";
    await send(exchange, requestHead("GET", "/livez", {}));
    assert.equal((await answered(exchange, "/livez on the same connection")).status, 200);
    exchange.socket.destroy();
  });

  it("when an unrouted request's client goes on sending 64 MiB, then the connection is closed after a bounded amount", async () => {
    const exchange = await openExchange(service.url, requestHead("POST", "/nope", { "content-type": "application/json", "transfer-encoding": "chunked" }));
    assertPlatform(await answered(exchange, "the 404"), 404, "not_found");
    const piece = `${(1024 * KIB).toString(16)}\r\n${" ".repeat(1024 * KIB)}\r\n`;
    for (let i = 0; i < 64 && !exchange.closed; i++) await send(exchange, piece);
    await eventually(async () => exchange.closed, Boolean, { timeoutMs: 5_000, what: "the server to close the connection" });
    assert.ok(exchange.sent < 32 * 1024 * KIB, `${exchange.sent} bytes were taken`);
  });

  it("when a GET announces a body it never sends, then it is answered and the connection is closed after the linger bound, not held for the request timeout", async () => {
    const exchange = await openExchange(service.url, requestHead("GET", "/livez", json(48 * KIB)));
    assert.equal((await answered(exchange, "the /livez answer")).status, 200);
    await eventually(async () => exchange.closed, Boolean, { timeoutMs: 5_000, what: "the server to close the connection" });
  });

  it("when a GET's small body was sent whole, then the connection serves the next request", async () => {
    const exchange = await openExchange(service.url, requestHead("GET", "/livez", json(2)) + "{}");
    assert.equal((await answered(exchange, "the first /livez")).status, 200);
    exchange.received = "";
    await send(exchange, requestHead("GET", "/livez", {}));
    assert.equal((await answered(exchange, "/livez on the same connection")).status, 200);
    exchange.socket.destroy();
  });

  it("when DELETE /admin/v1/keys/:keyId announces a body without the admin token, then 401 is answered before a byte of it was sent", async () => {
    const exchange = await openExchange(service.url, requestHead("DELETE", "/admin/v1/keys/key_123", json(48 * KIB, { authorization: "Bearer wrong" })));
    assertPlatform(await answered(exchange, "the 401"), 401, "invalid_admin_token");
    assert.equal(exchange.sent, 0);
    exchange.socket.destroy();
  });

  it("when a body is not sent as JSON, then 415 is answered in the surface's shape before a byte of it was sent", async () => {
    const cases: { path: string; headers: Record<string, string>; vendor: boolean }[] = [
      { path: "/api/v1/generations", headers: { authorization: `Bearer ${customer.apiKey}`, "content-type": "text/plain" }, vendor: false },
      { path: `${VENDOR}/models/aimodel-3.5-flash:generateContent`, headers: { "x-vendor-api-key": customer.apiKey, "content-type": "text/plain; charset=utf-8" }, vendor: true },
      { path: "/admin/v1/accounts", headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, vendor: false }, // no Content-Type at all
      { path: "/admin/v1/accounts", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/x-www-form-urlencoded" }, vendor: false },
    ];
    for (const row of cases) {
      const exchange = await openExchange(service.url, requestHead("POST", row.path, { ...row.headers, "content-length": 48 * KIB }));
      const answer = await answered(exchange, `the 415 of ${row.path}`);
      if (row.vendor) assertVendor(answer, 415, "INVALID_ARGUMENT", "UNSUPPORTED_MEDIA_TYPE");
      else {
        assertPlatform(answer, 415, "unsupported_media_type");
        assert.equal(answer.json.error.message, "send the body as Content-Type: application/json");
      }
      assert.equal(exchange.sent, 0);
      exchange.socket.destroy();
    }
    // JSON with parameters, in any case, is JSON.
    const accepted = await postWhole(service, "/api/v1/generations", { authorization: `Bearer ${customer.apiKey}`, "content-type": "Application/JSON; charset=utf-8" }, JSON.stringify(generation()));
    assert.equal(accepted.status, 202, accepted.text);
  });

  it("when a video interaction announces more than MAX_BODY_BYTES, then 422 INPUT_TOO_LARGE (a job's validation, the spec's 422, in the vendor's shape) names MAX_BODY_BYTES before the body is sent (it carries no images)", async () => {
    const exchange = await openExchange(service.url, requestHead("POST", `${VENDOR}/interactions`, json(100 * KIB, { "x-vendor-api-key": customer.apiKey })));
    const answer = await answered(exchange, "the 422");
    assertVendor(answer, 422, "INVALID_ARGUMENT", "INPUT_TOO_LARGE");
    assert.match(answer.json.error.message, /64 KiB/);
    assert.equal(exchange.sent, 0);
    exchange.socket.destroy();
  });
});

describe("when many requests are refused before their bodies arrive", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("when a refused client sends its body after reading the answer, then the body is discarded and the connection serves the next request", async () => {
    const exchange = await openExchange(service.url, requestHead("POST", "/api/v1/generations", json(256 * KIB)));
    assertPlatform(await answered(exchange, "the 401"), 401, "missing_api_key");
    await send(exchange, Buffer.alloc(256 * KIB, 0x20));
    exchange.received = "";
    await send(exchange, requestHead("GET", "/livez", {}));
    assert.equal((await answered(exchange, "/livez on the same connection")).status, 200);
    exchange.socket.destroy();
  });

  it("when 200 clients without a key announce 1 MiB each, then each reads its 401, and every connection is closed after the linger bound", async () => {
    // One shared timer serves the lingering refusals, never one per request: test/transport/linger-queue.test.ts.
    const exchanges = await Promise.all(
      Array.from({ length: 200 }, () => openExchange(service.url, requestHead("POST", "/api/v1/generations", json(1024 * KIB)))),
    );
    for (const exchange of exchanges) assertPlatform(await answered(exchange, "a 401"), 401, "missing_api_key");
    // None sends its body: each connection is closed once LINGER_MS (2 s) passed.
    const begun = Date.now();
    await eventually(async () => exchanges.filter((e) => !e.closed).length, (open) => open === 0, { timeoutMs: 10_000, what: "every refused connection to close" });
    assert.ok(Date.now() - begun < 6_000);
  });
});
