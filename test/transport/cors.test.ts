// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config/config.js";
import { launchService } from "../../src/runtime/start-service.js";
import { ADMIN_TOKEN, call, createCustomer, eventually, startTestService, type TestService } from "../support/harness.js";

/**
 * Issue 9, CORS on the gateway port: preflights of every surface answered
 * for the origins of CORS_ORIGINS only, with the key and Connect headers
 * allowed and the headers a page must read exposed; nothing at all for
 * other origins, nor without CORS_ORIGINS.
 */

const APP = "http://app.example";
const ADMIN_APP = "https://admin.example:8443";

/** One path of each surface of the gateway port, with the method a page would use. */
const SURFACES: readonly (readonly [string, string])[] = [
  ["POST", "/api/v1/generations"],
  ["GET", "/api/v1/jobs/00000000-0000-4000-8000-000000000000"],
  ["GET", "/api/v1/balance"],
  ["POST", "/api/v1/nb2/text-generations"],
  ["POST", "/api/v1/url-generations"],
  ["POST", "/api/aimodel/v1beta/models/aimodel-3.5-flash:streamGenerateContent"],
  ["GET", "/api/aimodel/v1/models"],
  ["POST", "/admin/v1/accounts"],
  ["DELETE", "/admin/v1/keys/some-key"],
  ["PUT", "/admin/v1/pause"],
  ["GET", "/files/some/key.png"],
  ["POST", "/generation.v1.GenerationService/CreateGeneration"],
  ["POST", "/generation.v1.TextService/StreamGenerateContent"],
  ["POST", "/generation.v1.AdminService/CreateAccount"],
];

/** What a page sends: the credentials, Idempotency-Key, JSON, and every header Connect-Web and gRPC-Web send. */
const REQUESTED_HEADERS = [
  "authorization", "x-vendor-api-key", "x-goog-api-key", "idempotency-key", "content-type",
  "connect-protocol-version", "connect-timeout-ms", "x-grpc-web", "x-user-agent", "grpc-timeout",
];

const EXPOSED = ["retry-after", "idempotent-replayed", "location", "grpc-status", "grpc-message", "grpc-status-details-bin"];

const listOf = (value: string | null) => (value ?? "").split(",").map((item) => item.trim().toLowerCase()).filter(Boolean);
const corsHeadersOf = (headers: Headers) => [...headers.keys()].filter((name) => name.startsWith("access-control-"));

function preflight(service: { url: string }, method: string, path: string, origin: string) {
  return fetch(service.url + path, {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": method, "access-control-request-headers": REQUESTED_HEADERS.join(",") },
  });
}

describe("CORS on the gateway port for the origins of CORS_ORIGINS", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ CORS_ORIGINS: `${APP}, ${ADMIN_APP}` });
  });
  after(async () => {
    await service?.close();
  });

  it("when a page of a listed origin sends a preflight to any surface (REST, aliases, vendor, admin, files, Connect), then 204 allows its origin, the method, the key and Connect headers", async () => {
    for (const origin of [APP, ADMIN_APP]) {
      for (const [method, path] of SURFACES) {
        const response = await preflight(service, method, path, origin);
        const what = `${origin} ${method} ${path}`;
        assert.equal(response.status, 204, what);
        assert.equal(await response.text(), "");
        assert.equal(response.headers.get("access-control-allow-origin"), origin, what);
        assert.equal(response.headers.get("access-control-allow-credentials"), null, "credentials travel in headers, never cookies");
        assert.ok(listOf(response.headers.get("vary")).includes("origin"), `${what}: caches must key on the origin`);
        assert.ok(listOf(response.headers.get("access-control-allow-methods")).includes(method.toLowerCase()), what);
        const allowed = listOf(response.headers.get("access-control-allow-headers"));
        for (const header of REQUESTED_HEADERS) assert.ok(allowed.includes(header), `${what}: ${header} allowed (${allowed})`);
        assert.ok(Number(response.headers.get("access-control-max-age")) > 0);
      }
    }
  });

  it("when a page of a listed origin is answered (a list, a created job, a 401, a Connect error, an SSE stream), then the answer names its origin and exposes Retry-After, Idempotent-Replayed, Location and the gRPC status headers", async () => {
    const customer = await createCustomer(service);
    const models = await call(service, "GET", "/api/v1/models", { headers: { origin: APP } });
    const created = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey, headers: { origin: APP, "idempotency-key": "cors-1" }, body: { model: "aimodel-3-pro-image", prompt: "a fox", resolution: "1K" },
    });
    const replayed = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey, headers: { origin: APP, "idempotency-key": "cors-1" }, body: { model: "aimodel-3-pro-image", prompt: "a fox", resolution: "1K" },
    });
    const unauthenticated = await call(service, "GET", "/api/v1/balance", { headers: { origin: ADMIN_APP } });
    const rpcError = await fetch(`${service.url}/generation.v1.GenerationService/GetBalance`, {
      method: "POST", headers: { origin: APP, "content-type": "application/json" }, body: "{}",
    });
    // An SSE stream is written past Fastify's reply: the CORS headers must go out with it all the same.
    const stream = await fetch(`${service.url}/api/aimodel/v1beta/models/aimodel-3.5-flash:streamGenerateContent?alt=sse`, {
      method: "POST",
      headers: { origin: APP, "content-type": "application/json", "x-vendor-api-key": customer.apiKey },
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "a haiku" }] }] }),
    });
    assert.equal(stream.status, 200);
    assert.match(stream.headers.get("content-type") ?? "", /text\/event-stream/);
    assert.match(await stream.text(), /^data: /);
    assert.equal(models.status, 200);
    assert.equal(created.status, 202, created.text);
    assert.equal(replayed.headers.get("idempotent-replayed"), "true");
    assert.equal(unauthenticated.status, 401);
    assert.equal(rpcError.status, 401);
    const answers: [string, Headers, string][] = [
      ["list", models.headers, APP], ["created", created.headers, APP], ["replayed", replayed.headers, APP],
      ["401", unauthenticated.headers, ADMIN_APP], ["Connect error", rpcError.headers, APP], ["SSE stream", stream.headers, APP],
    ];
    for (const [what, headers, origin] of answers) {
      assert.equal(headers.get("access-control-allow-origin"), origin, what);
      const exposed = listOf(headers.get("access-control-expose-headers"));
      for (const header of EXPOSED) assert.ok(exposed.includes(header), `${what}: ${header} exposed (${exposed})`);
    }
  });

  it("when the origin is not listed (another host, scheme or port, or an opaque origin), then neither the preflight nor the answer carries an Access-Control header", async () => {
    for (const origin of ["http://evil.example", "https://app.example", "http://app.example:8080", "https://admin.example", "null"]) {
      for (const [method, path] of [["POST", "/api/v1/generations"], ["POST", "/generation.v1.GenerationService/GetBalance"]] as const) {
        const response = await preflight(service, method, path, origin);
        assert.ok(response.status === 404 || response.status === 405, `${origin} ${path}: the answer it got before, ${response.status}`);
        assert.deepEqual(corsHeadersOf(response.headers), [], `${origin} ${path}`);
      }
      const answer = await call(service, "GET", "/api/v1/models", { headers: { origin } });
      assert.equal(answer.status, 200);
      assert.deepEqual(corsHeadersOf(answer.headers), [], origin);
    }
  });
});

describe("CORS while the process cannot serve yet", () => {
  const closers: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const close of closers) await close().catch(() => undefined);
  });

  it("when its store cannot be reached at start, then a listed page's preflight is still answered, and the 503 names its origin and exposes Retry-After", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "gen-cors-starting-"));
    // Nothing listens on port 1: the store is "down" for as long as this test wants.
    const config = loadConfig({
      HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir, LOG_LEVEL: "silent", DRAIN_DELAY: "0ms",
      CASSANDRA_CONTACT_POINTS: "127.0.0.1:1", KAFKA_BROKERS: "127.0.0.1:1", CORS_ORIGINS: APP,
    });
    const launched = await launchService(config);
    closers.push(async () => {
      await launched.close({ drain: false });
      await rm(dataDir, { recursive: true, force: true });
    });
    const service = { url: launched.httpUrl };
    await eventually(() => call(service, "GET", "/readyz"), (r) => /cassandra/.test(r.json?.reason ?? ""), { what: "/readyz to name cassandra" });

    const answered = await preflight(service, "GET", "/api/v1/balance", APP);
    assert.equal(answered.status, 204);
    assert.equal(answered.headers.get("access-control-allow-origin"), APP);
    const refused = await call(service, "GET", "/api/v1/balance", { key: "sk_any", headers: { origin: APP } });
    assert.equal(refused.status, 503);
    assert.ok(Number(refused.headers.get("retry-after")) > 0);
    assert.equal(refused.headers.get("access-control-allow-origin"), APP);
    assert.ok(listOf(refused.headers.get("access-control-expose-headers")).includes("retry-after"));
  });
});

describe("CORS without CORS_ORIGINS (the default)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(async () => {
    await service?.close();
  });

  it("when a page sends a preflight or a request, then it gets the 404 it got before and no answer carries an Access-Control header", async () => {
    for (const [method, path] of SURFACES.filter(([, path]) => !path.startsWith("/generation."))) {
      const response = await preflight(service, method, path, APP);
      assert.equal(response.status, 404, `${method} ${path}`);
      assert.deepEqual(corsHeadersOf(response.headers), [], path);
    }
    const answer = await call(service, "GET", "/api/v1/models", { headers: { origin: APP } });
    assert.equal(answer.status, 200);
    assert.deepEqual(corsHeadersOf(answer.headers), []);
  });
});

describe("CORS_ORIGINS as configuration", () => {
  const load = (value: string) => loadConfig({ CORS_ORIGINS: value, URL_SIGNING_SECRET: "test", DATA_DIR: tmpdir() });

  it("when it lists exact origins, then they are kept once each, in order; when unset, none", () => {
    assert.deepEqual(load(" https://app.example.com ,http://localhost:5173,https://app.example.com").corsOrigins, [
      "https://app.example.com", "http://localhost:5173",
    ]);
    assert.deepEqual(load("").corsOrigins, []);
  });

  it("when an entry is *, has a path or trailing slash, another scheme, upper case or a default port, then start-up fails naming it (and the origin meant, when there is one)", () => {
    assert.throws(() => load("*"), /CORS_ORIGINS: "\*" is not allowed/);
    assert.throws(() => load("https://app.example.com/"), /"https:\/\/app\.example\.com\/" is not an origin.*did you mean "https:\/\/app\.example\.com"/);
    assert.throws(() => load("https://app.example.com/path"), /is not an origin/);
    assert.throws(() => load("https://App.Example.com"), /did you mean "https:\/\/app\.example\.com"/);
    assert.throws(() => load("https://app.example.com:443"), /did you mean "https:\/\/app\.example\.com"/);
    assert.throws(() => load("ftp://files.example.com"), /"ftp:\/\/files\.example\.com" is not an origin/);
    assert.throws(() => load("app.example.com"), /is not an origin/);
  });
});
