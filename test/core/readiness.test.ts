// backends: embedded, real
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config/config.js";
import { launchService, startService } from "../../src/runtime/start-service.js";
import { captureLog } from "../support/capture-log.js";
import { ADMIN_TOKEN, BACKEND, call, eventually, startTestService } from "../support/harness.js";
import { assertPlatformError, assertVendorError } from "../support/jobs-api-helpers.js";

/** Issue 7, "Readiness and health": a process that cannot serve says 503 with Retry-After, never 500. */
describe("liveness, readiness and the start-up gate", () => {
  const closers: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const close of closers) await close().catch(() => undefined);
  });

  it("when the process serves, then /livez and /readyz answer 200 and /readyz lists each dependency as up", async () => {
    const service = await startTestService();
    closers.push(() => service.close());
    const live = await call(service, "GET", "/livez");
    assert.equal(live.status, 200);
    assert.deepEqual(live.json, { status: "ok" });
    const ready = await call(service, "GET", "/readyz");
    assert.equal(ready.status, 200, ready.text);
    assert.equal(ready.json.status, "ok");
    const expected = BACKEND === "real" ? ["cassandra", "kafka"] : ["sqlite"];
    assert.deepEqual(Object.keys(ready.json.checks).sort(), expected);
    assert.ok(Object.values(ready.json.checks).every((state) => state === "up"), ready.text);
  });

  it("when shutdown begins, then /readyz turns 503 draining at once while requests are still served, and the port closes after DRAIN_DELAY", async () => {
    const service = await startTestService({ DRAIN_DELAY: "1500ms" });
    const closing = service.running.close();
    const draining = await call(service, "GET", "/readyz");
    assert.equal(draining.status, 503, draining.text);
    assert.equal(draining.json.status, "draining");
    assert.ok(draining.headers.get("retry-after"));
    const models = await call(service, "GET", "/api/v1/models");
    assert.equal(models.status, 200, "a draining process still serves what reaches it");
    await closing;
    await assert.rejects(fetch(`${service.url}/livez`), "the port is closed once the drain delay is over");
    await service.close();
  });

  it("when its store cannot be reached at start, then the process keeps waiting: /livez 200, /readyz 503 naming it, every route 503 with Retry-After in its surface's shape", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "gen-starting-"));
    // Nothing listens on port 1: the store is "down" for as long as this test wants.
    const config = loadConfig({
      HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir, LOG_LEVEL: "silent", DRAIN_DELAY: "0ms",
      CASSANDRA_CONTACT_POINTS: "127.0.0.1:1", KAFKA_BROKERS: "127.0.0.1:1",
    });
    const launched = await launchService(config);
    closers.push(async () => {
      await launched.close({ drain: false });
      await rm(dataDir, { recursive: true, force: true });
    });
    const service = { url: launched.httpUrl };

    const ready = await eventually(
      () => call(service, "GET", "/readyz"),
      (r) => r.status === 503 && /cassandra/.test(r.json?.reason ?? ""),
      { what: "/readyz to name cassandra" },
    );
    assert.equal(ready.json.status, "starting");
    assert.ok(ready.headers.get("retry-after"));
    assert.equal((await call(service, "GET", "/livez")).status, 200, "the process itself is alive");

    const models = await call(service, "GET", "/api/v1/models");
    assertPlatformError(models, 503, "service_unavailable");
    assert.ok(Number(models.headers.get("retry-after")) > 0);
    const balance = await call(service, "GET", "/api/v1/balance", { key: "sk_anything" });
    assertPlatformError(balance, 503, "service_unavailable");
    const admin = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name: "x", balance: "1.00" } });
    assertPlatformError(admin, 503, "service_unavailable");
    const vendor = await call(service, "POST", "/api/aimodel/v1beta/models/aimodel-3.5-flash:generateContent", {
      vendorKey: "sk_anything", body: { contents: [{ role: "user", parts: [{ text: "hi" }] }] },
    });
    assertVendorError(vendor, 503, "UNAVAILABLE");
    assert.ok(vendor.headers.get("retry-after"));
    const unknown = await call(service, "GET", "/no/such/route");
    assert.equal(unknown.status, 503, "not even a 404 is answered before the process can serve");
  });

  it("when it is stopped while it waits for its store, then start-up ends with \"stopped during start-up\", and the wait was logged once", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "gen-starting-"));
    const log = captureLog("info");
    const config = loadConfig({
      HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir, DRAIN_DELAY: "0ms",
      CASSANDRA_CONTACT_POINTS: "127.0.0.1:1", KAFKA_BROKERS: "127.0.0.1:1",
    });
    const launched = await launchService(config, { logger: log.logger });
    closers.push(() => rm(dataDir, { recursive: true, force: true }));
    const ready = launched.ready.then(() => "ready", (error: Error) => error.message);
    const waits = () => log.messages().filter((m) => m.startsWith("waiting for"));
    await eventually(async () => waits(), (lines) => lines.length > 0, { what: "the wait logged" });
    await launched.close({ drain: false });
    assert.equal(await ready, "stopped during start-up");
    assert.equal(waits().length, 1, waits().join("\n"));
    assert.match(waits()[0]!, /^waiting for cassandra \(retrying every 1000 ms\): /);
  });
});

/**
 * Issue 34: `rm service.db*` under a running service left /readyz at 200, acknowledged jobs and credits into the
 * deleted file, logged nothing, and a restart found the store empty. The service must notice and refuse instead.
 */
describe("the database file deleted under a running service", { skip: BACKEND === "real" && "about the embedded SQLite file" }, () => {
  const closers: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const close of closers) await close().catch(() => undefined);
  });

  /** The whole service on SQLite in a fresh DATA_DIR, its log kept; an account with a key for every model. */
  async function serviceWithCustomer(env: Record<string, string>) {
    const dataDir = await mkdtemp(join(tmpdir(), "gen-deleted-db-"));
    const log = captureLog("info");
    const running = await startService(
      loadConfig({ HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir, DRAIN_DELAY: "0ms", SIMULATED_LATENCY_MS: "30", ...env }),
      { logger: log.logger },
    );
    closers.push(async () => {
      await running.close();
      await rm(dataDir, { recursive: true, force: true });
    });
    const service = { url: running.httpUrl };
    const account = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name: "me", balance: "10.00" } });
    assert.equal(account.status, 201, account.text);
    const key = await call(service, "POST", `/admin/v1/accounts/${account.json.account_id}/keys`, { admin: true, body: { models: ["*"] } });
    assert.equal(key.status, 201, key.text);
    return { service, dataDir, log, accountId: account.json.account_id as string, apiKey: key.json.api_key as string };
  }

  /** What an operator's `rm DATA_DIR/service.db*` does. */
  async function removeDatabase(dataDir: string) {
    const files = (await readdir(dataDir)).filter((name) => name.startsWith("service.db"));
    assert.ok(files.includes("service.db") && files.includes("service.db-wal"), `the store's files: ${files.join(", ")}`);
    for (const name of files) await rm(join(dataDir, name));
  }

  const job = { model: "aimodel-2.5-flash-image", prompt: "a kite", aspect_ratio: "1:1" };

  it("when the file is deleted, then /readyz answers 503 with Retry-After naming sqlite, requests are refused with 503 and Retry-After, and one error names the file", async () => {
    const { service, dataDir, log, accountId, apiKey } = await serviceWithCustomer({ DEPENDENCY_CHECK_INTERVAL: "100ms" });
    assert.equal((await call(service, "GET", "/readyz")).status, 200);
    await removeDatabase(dataDir);

    const ready = await eventually(() => call(service, "GET", "/readyz"), (r) => r.status === 503, { what: "/readyz to turn 503" });
    assert.equal(ready.json.status, "unavailable");
    assert.equal(ready.json.checks.sqlite, "down");
    assert.match(ready.json.reason, /sqlite/);
    assert.ok(Number(ready.headers.get("retry-after")) > 0, "Retry-After on /readyz");

    const created = await call(service, "POST", "/api/v1/generations", { key: apiKey, body: job });
    assertPlatformError(created, 503, "service_unavailable");
    assert.ok(Number(created.headers.get("retry-after")) > 0);
    const credited = await call(service, "POST", `/admin/v1/accounts/${accountId}/credits`, { admin: true, body: { amount: "1.00" } });
    assertPlatformError(credited, 503, "service_unavailable");
    assert.ok(Number(credited.headers.get("retry-after")) > 0);

    // Probed every 100 ms for a while by now: told once, at error, naming the file.
    const said = log.lines.filter((line) => line.level >= 50 && line.msg.includes(join(dataDir, "service.db")));
    assert.equal(said.length, 1, JSON.stringify(log.lines.filter((line) => line.level >= 40)));
    assert.equal(said[0]!.level, 50);
  });

  it("when the file is deleted, then job creations and credits are refused with 503 and Retry-After before readiness looks, and none is acknowledged", async () => {
    // Readiness does not probe during this test: the writes themselves must notice.
    const { service, dataDir, accountId, apiKey } = await serviceWithCustomer({ DEPENDENCY_CHECK_INTERVAL: "1h" });
    const before = await call(service, "POST", "/api/v1/generations", { key: apiKey, body: job });
    assert.equal(before.status, 202, before.text);
    await removeDatabase(dataDir);

    const created = await Promise.all(Array.from({ length: 10 }, () => call(service, "POST", "/api/v1/generations", { key: apiKey, body: job })));
    for (const response of created) {
      assertPlatformError(response, 503, "service_unavailable");
      assert.ok(Number(response.headers.get("retry-after")) > 0);
    }
    const credited = await call(service, "POST", `/admin/v1/accounts/${accountId}/credits`, { admin: true, body: { amount: "1.00" } });
    assertPlatformError(credited, 503, "service_unavailable");
    assert.ok(Number(credited.headers.get("retry-after")) > 0);
  });
});
