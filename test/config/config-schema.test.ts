// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as config from "../../src/config/config.js";
import { configFrom, DEFAULT_EDGE_LIMITS, defaultConfig } from "../../src/config/config.js";
import type { FailureBudget } from "../../src/domain/accounts/failed-credentials.js";
import { DEFAULT_LIMITS, MIB, type ValidationLimits } from "../../src/domain/validation/limits.js";
import type { WorkerOptions } from "../../src/core/workers/generation-worker.js";
import type { WebhookFairness } from "../../src/core/workers/webhook-dispatcher.js";
import type { TracingSettings } from "../../src/adapters/observability/tracing.js";
import { DEFAULT_RPC_EDGE } from "../../src/transport/rpc/rpc-server.js";
import { loadServiceSettings } from "../../src/runtime/settings.js";
import { SAFETY_THRESHOLDS } from "../../src/config/schema.js";
import { HARM_BLOCK_THRESHOLDS } from "../../src/domain/text/safety.js";

/** True when each type is assignable to the other: config's own copy of a type is the one the core takes. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameShapes: [
  Same<config.WorkerOptions, WorkerOptions>,
  Same<config.WebhookFairness, WebhookFairness>,
  Same<config.TracingSettings, TracingSettings>,
  Same<config.FailureBudget, FailureBudget>,
  Same<config.ValidationLimits, ValidationLimits>,
] = [true, true, true, true, true];

describe("config: one schema gives the defaults", () => {
  it("when the configuration's types are compared with the core's, then each is the same shape (config imports none of them)", () => {
    assert.deepEqual(sameShapes, [true, true, true, true, true]);
  });

  it("when SAFETY_MIN_THRESHOLDS is set, then it is read per category; unset, none; a bad entry stops the start naming it", () => {
    assert.deepEqual([...SAFETY_THRESHOLDS], [...HARM_BLOCK_THRESHOLDS], "the config's thresholds are the domain's, in order");
    assert.deepEqual(defaultConfig().safetyMinimums, {});
    const set = configFrom({ SAFETY_MIN_THRESHOLDS: " HARM_CATEGORY_HARASSMENT=BLOCK_MEDIUM_AND_ABOVE, HARM_CATEGORY_HATE_SPEECH = OFF" });
    assert.deepEqual(set.safetyMinimums, { HARM_CATEGORY_HARASSMENT: "BLOCK_MEDIUM_AND_ABOVE", HARM_CATEGORY_HATE_SPEECH: "OFF" });
    for (const bad of ["HARASSMENT=OFF", "HARM_CATEGORY_X=BLOCK_SOME", "HARM_CATEGORY_X", "HARM_CATEGORY_X=OFF=OFF"]) {
      assert.throws(() => configFrom({ SAFETY_MIN_THRESHOLDS: bad }), new RegExp(`SAFETY_MIN_THRESHOLDS: "${bad}" is not`), bad);
    }
  });

  it("when no variable is set, then the validation limits are the domain's defaults", () => {
    assert.deepEqual(defaultConfig().limits, DEFAULT_LIMITS);
  });

  it("when no variable is set, then the edge's limits are those docs/configuration.md names, and the core port's default edge is the schema's", () => {
    assert.deepEqual(DEFAULT_EDGE_LIMITS, {
      headersTimeoutMs: 10_000, requestTimeoutMs: 60_000, idleTimeoutMs: 30_000, keepAliveTimeoutMs: 5_000,
      maxConnections: 10_000, maxConnectionsPerClient: 256, maxBodyBytes: 1 * MIB, largeUploadBytes: 1 * MIB,
      maxConcurrentLargeUploads: 4, maxConcurrentStreams: 100, maxBodyMemory: 512 * MIB, maxPipelinedRequests: 8,
    });
    assert.deepEqual(defaultConfig().edge, DEFAULT_EDGE_LIMITS);
    assert.equal(DEFAULT_RPC_EDGE.edge, DEFAULT_EDGE_LIMITS);
  });

  it("when a variable is empty, then it takes its default, as when unset", () => {
    const empty = configFrom({ PORT: "", JOB_LEASE: "", MAX_BODY_BYTES: "", ROLE: "", EMBEDDED_STORE: "", WEBHOOK_RETRY_SCHEDULE: "" });
    const unset = defaultConfig();
    assert.equal(empty.port, 8080);
    assert.deepEqual([empty.worker.leaseMs, empty.edge.maxBodyBytes, [...empty.roles], empty.embeddedStore, empty.webhookRetryScheduleMs],
      [unset.worker.leaseMs, unset.edge.maxBodyBytes, [...unset.roles], unset.embeddedStore, unset.webhookRetryScheduleMs]);
  });

  it("when values are set in each syntax, then durations, sizes, flags, lists and choices are read as before", () => {
    const c = configFrom({
      AUTH_FAILURE_WINDOW: "10m", MAX_INPUT_BYTES: "1GiB", MAX_BODY_BYTES: "4096B", LARGE_UPLOAD_BYTES: "64KiB", ALLOW_PRIVATE_URLS: "1",
      EMBEDDED_STORE: "MEMORY", HTTP_HEADERS_TIMEOUT: "1ms", WEBHOOK_RETRY_SCHEDULE: "1s, 2m", PUBLIC_BASE_URL: "https://x.example//",
      KAFKA_BROKERS: " a:1 ,, b:2", CASSANDRA_CONTACT_POINTS: "c:1", JOB_RETENTION: "1s", KAFKA_SESSION_TIMEOUT: "6s", KAFKA_RETRIES: "5",
    });
    assert.equal(c.authFailures.windowMs, 600_000);
    assert.equal(c.maxInputBytes, 1024 * MIB);
    assert.equal(c.edge.maxBodyBytes, 4096);
    assert.equal(c.edge.largeUploadBytes, 64 * 1024);
    assert.equal(c.allowPrivateUrls, true);
    assert.equal(c.embeddedStore, "memory");
    assert.equal(c.edge.headersTimeoutMs, 100, "raised to its bound");
    assert.deepEqual(c.webhookRetryScheduleMs, [1000, 120_000]);
    assert.equal(c.publicBaseUrl, "https://x.example");
    assert.deepEqual(c.kafka?.brokers, ["a:1", "b:2"]);
    assert.deepEqual([c.kafka?.sessionTimeoutMs, c.kafka?.retries], [6000, 5]);
    assert.equal(c.jobRetentionMs, 1000);
  });

  it("when only KAFKA_BROKERS is set, then the Kafka clients keep a 10 s session and 12 retries, and a session under 3 s is raised", () => {
    const kafka = configFrom({ KAFKA_BROKERS: "a:1" }).kafka;
    assert.deepEqual([kafka?.sessionTimeoutMs, kafka?.retries], [10_000, 12]);
    assert.equal(configFrom({ KAFKA_BROKERS: "a:1", KAFKA_SESSION_TIMEOUT: "1s" }).kafka?.sessionTimeoutMs, 3000);
    assert.throws(() => configFrom({ KAFKA_RETRIES: "0" }), { message: 'KAFKA_RETRIES must be an integer ≥ 1 (got "0")' });
  });

  it("when values are refused, then the message names each variable refused and what it takes", () => {
    assert.throws(() => configFrom({ JOB_LEASE: "5" }), { message: 'JOB_LEASE: "5" is not a duration such as 500ms, 5s, 30m, 2h or 30d' });
    assert.throws(() => configFrom({ PORT: "x" }), { message: 'PORT must be an integer ≥ 0 (got "x")' });
    assert.throws(() => configFrom({ MAX_BODY_BYTES: "1MB" }), { message: 'MAX_BODY_BYTES must be a size such as 4096, 64KiB or 2MiB, at least 1 bytes (got "1MB")' });
    assert.throws(() => configFrom({ EMBEDDED_STORE: "disk" }), { message: 'EMBEDDED_STORE must be one of sqlite, memory (got "disk")' });
    assert.throws(() => configFrom({ JOB_RETENTION: "0s" }), { message: 'JOB_RETENTION must be between 1s and 20 years (got "0s")' });
    assert.throws(() => configFrom({ ROLE: "api" }), /running a single ROLE needs shared state/);
    assert.throws(() => configFrom({ VENDOR_BASE_URL: "http://v.example" }), /VENDOR_API_KEY is required/);
    assert.throws(() => configFrom({ PORT: "-1", ALLOW_PRIVATE_URLS: "yes" }), /PORT must be an integer ≥ 0 .*; ALLOW_PRIVATE_URLS must be true or false/);
  });
});

describe("config: the files it names are read at start, by the runtime", () => {
  const scratch = () => mkdtempSync(join(tmpdir(), "config-schema-"));

  it("when the configuration is read, then no file is read or written: the named files may not even exist", () => {
    const dir = scratch();
    try {
      const dataDir = join(dir, "data");
      const c = configFrom({ DATA_DIR: dataDir, PRICES_FILE: join(dir, "no-prices.json"), ROUTES_FILE: join(dir, "no-routes.json") });
      assert.equal(c.urlSigningSecret, undefined);
      assert.equal(existsSync(dataDir), false);
      assert.throws(() => loadServiceSettings(c), /ENOENT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("when no URL_SIGNING_SECRET is set, then the first start keeps a new key in DATA_DIR and the next start reads it", () => {
    const dir = scratch();
    try {
      const first = loadServiceSettings(configFrom({ DATA_DIR: dir }));
      assert.equal(readFileSync(join(dir, "url-signing.key"), "utf8"), first.urlSigningSecret.toString("hex"));
      assert.deepEqual(loadServiceSettings(configFrom({ DATA_DIR: dir })).urlSigningSecret, first.urlSigningSecret);
      assert.deepEqual(loadServiceSettings(configFrom({ DATA_DIR: dir, URL_SIGNING_SECRET: "given" })).urlSigningSecret, Buffer.from("given"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("when ROUTES_FILE names an unknown model, then the start is refused naming the route and the model; api_key_env is read from the environment", () => {
    const dir = scratch();
    try {
      const file = join(dir, "routes.json");
      const env = { DATA_DIR: dir, ROUTES_FILE: file, UPSTREAM_TIMEOUT: "7s", MY_KEY: "k-1" };
      writeFileSync(file, JSON.stringify({ routes: [{ name: "a", base_url: "http://a.example", api_key_env: "MY_KEY", models: ["aimodel-nope"] }] }));
      assert.throws(() => loadServiceSettings(configFrom(env)), { message: 'ROUTES_FILE: route a names an unknown model "aimodel-nope"' });
      writeFileSync(file, JSON.stringify({ routes: [{ name: "a", base_url: "http://a.example/", api_key_env: "MY_KEY" }] }));
      assert.deepEqual(loadServiceSettings(configFrom(env)).routes, [
        { name: "a", baseUrl: "http://a.example", apiKey: "k-1", weight: 1, timeoutMs: 7000, maxInputImages: 100, models: ["*"] },
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("when VENDOR_BASE_URL and VENDOR_API_KEY are set, then every model goes to that one route; neither: the simulated provider", () => {
    const dir = scratch();
    try {
      const vendor = loadServiceSettings(configFrom({ DATA_DIR: dir, VENDOR_BASE_URL: "http://v.example", VENDOR_API_KEY: "k", MAX_INPUT_IMAGES: "7" }));
      assert.deepEqual(vendor.routes, [{ name: "vendor", baseUrl: "http://v.example", apiKey: "k", weight: 1, timeoutMs: 120_000, maxInputImages: 7, models: ["*"] }]);
      assert.equal(loadServiceSettings(configFrom({ DATA_DIR: dir })).routes, undefined);
      assert.ok(loadServiceSettings(configFrom({ DATA_DIR: dir })).prices.size > 0, "the default price table");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
