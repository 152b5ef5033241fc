import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config/config.js";
import { launchService } from "../../src/runtime/start-service.js";
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
});
