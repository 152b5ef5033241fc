// backends: embedded, outage
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BACKEND, call, dropRealBackend, eventually, realBackendEnv } from "../support/harness.js";
import {
  dumpOutput, ensureServersUp, Monitor, portOpen, seconds, serverAnswersAt, spawnService, startServer, stopServer, type SpawnedService,
} from "../support/outage.js";
import { GATEWAY_LISTENING, READY_LINE, READY_LINES } from "../support/service-output.js";

/**
 * A process started while Cassandra is down does not exit: it listens, says
 * it is alive (/livez) but not ready (/readyz names cassandra), answers every
 * other route 503 with Retry-After in that surface's error shape, and becomes
 * ready by itself, without a restart, once Cassandra is up.
 * It stops the shared server: run this file alone.
 */
const skip = BACKEND !== "real" && "needs TEST_BACKEND=real (stops and starts the Cassandra of infra/)";

/** Ready this soon after Cassandra answers (start-up retries every second, then migrates its keyspace). */
const READY_BOUND_MS = 20_000;

describe("when the service starts while Cassandra is down", { skip }, () => {
  let service: SpawnedService | undefined;
  const marks: { at: number; text: string }[] = [];
  const zero = Date.now();
  let monitor: Monitor | undefined;
  let env: Record<string, string> | undefined;

  before(ensureServersUp, { timeout: 300_000 });
  after(async () => {
    await monitor?.stop();
    await service?.stop("SIGKILL").catch(() => {});
    if (service) await dumpOutput("cassandra-down-at-start", service, zero, marks);
    await ensureServersUp(); // start Cassandra again if the test failed before it did
    if (env) {
      await dropRealBackend(env).catch(() => {});
      await rm(env.DATA_DIR!, { recursive: true, force: true });
    }
  }, { timeout: 300_000 });

  it(
    "then it keeps running, /livez 200, /readyz 503 naming cassandra, other routes 503 with Retry-After in their surface's shape, " +
      "and once Cassandra is up it becomes ready and serves without a restart",
    { timeout: 600_000 },
    async (t) => {
      await stopServer("cassandra");
      assert.equal(await portOpen("cassandra"), false, "Cassandra is down");
      env = {
        ...realBackendEnv(),
        DATA_DIR: await mkdtemp(join(tmpdir(), "gen-outage-start-")),
        URL_SIGNING_SECRET: randomBytes(16).toString("hex"),
        SIMULATED_LATENCY_MS: "100",
        DEPENDENCY_CHECK_INTERVAL: "250ms",
      };
      const spawnedAt = Date.now();
      service = spawnService(env);
      const pid = service.child.pid;
      const url = (await service.waitFor(GATEWAY_LISTENING, 60_000))[1]!;
      const listeningAt = Date.now();
      const api = { url };
      monitor = new Monitor(url, [{ path: "/livez" }, { path: "/readyz" }]);

      const livez = await call(api, "GET", "/livez");
      assert.equal(livez.status, 200, livez.text);
      assert.deepEqual(livez.json, { status: "ok" });
      const notReady = await eventually(() => call(api, "GET", "/readyz"), (r) => r.status !== 503 || /cassandra/i.test(r.json?.reason ?? ""), {
        timeoutMs: 20_000, intervalMs: 100, what: "/readyz naming cassandra",
      });
      assert.equal(notReady.status, 503, notReady.text);
      assert.equal(notReady.json.status, "starting", notReady.text);
      assert.match(notReady.json.reason, /^cassandra unreachable/, notReady.text);
      assert.ok(Number(notReady.headers.get("retry-after")) > 0, `/readyz Retry-After: ${notReady.headers.get("retry-after")}`);

      const models = await call(api, "GET", "/api/v1/models");
      assert.equal(models.status, 503, models.text);
      assert.ok(Number(models.headers.get("retry-after")) > 0, `Retry-After: ${models.headers.get("retry-after")}`);
      assert.equal(models.json?.error?.code, "service_unavailable", models.text);
      assert.equal(typeof models.json.error.message, "string");
      const vendor = await call(api, "POST", "/api/aimodel/v1beta/models/x:generateContent", {
        vendorKey: "any", body: { contents: [{ role: "user", parts: [{ text: "hello" }] }] },
      });
      assert.equal(vendor.status, 503, vendor.text);
      assert.ok(Number(vendor.headers.get("retry-after")) > 0, `vendor Retry-After: ${vendor.headers.get("retry-after")}`);
      assert.equal(vendor.json?.error?.code, 503, vendor.text);
      assert.equal(vendor.json?.error?.status, "UNAVAILABLE", vendor.text);
      assert.equal(typeof vendor.json.error.message, "string");
      const admin = await call(api, "POST", "/admin/v1/accounts", { admin: true, body: { name: "early", balance: "1.00" } });
      assert.equal(admin.status, 503, admin.text);
      assert.equal(admin.json?.error?.code, "service_unavailable", admin.text);
      assert.ok(service.alive(), `still running while Cassandra is down:\n${service.output()}`);
      assert.doesNotMatch(service.output(), READY_LINE, "not ready without Cassandra");
      // It keeps waiting (start-up retries every second) rather than exiting: watch it do so for a while.
      const probes = monitor;
      const waiting = (s: { status: number; json: any }) => s.status === 503 && /^cassandra unreachable/.test(s.json?.reason ?? "");
      await eventually(
        async () => {
          assert.ok(service!.alive(), `exited while waiting for Cassandra:\n${service!.output()}`);
          const since = probes.first("/readyz", 0, waiting)?.at ?? Date.now();
          return probes.of("/readyz", since).every(waiting) ? Date.now() - since : -1;
        },
        (waited) => waited >= 5_000,
        { timeoutMs: 30_000, intervalMs: 100, what: "5 s of /readyz naming cassandra with the process running" },
      );

      // --- Cassandra starts; the same process becomes ready by itself ---
      const startAt = Date.now();
      marks.push({ at: startAt, text: "up.sh began" });
      const answers = serverAnswersAt("cassandra");
      const startRun = await startServer("cassandra");
      const answersAt = await answers;
      marks.push({ at: answersAt, text: "server answers a client" });
      await service.waitFor(READY_LINE, 60_000);
      const readyLineAt = Date.now();
      await eventually(() => call(api, "GET", "/readyz"), (r) => r.status === 200, { timeoutMs: 20_000, intervalMs: 100, what: "/readyz 200" });
      const readyAt = Date.now();
      marks.push({ at: readyAt, text: "/readyz 200 seen" });
      await monitor.stop();
      assert.deepEqual((await call(api, "GET", "/readyz")).json, { status: "ok", checks: { cassandra: "up", kafka: "up" } });
      assert.ok(service.alive(), "the same process");
      assert.equal(service.child.pid, pid);
      const show = (s: { path: string; at: number; status: number; text: string }) => `${s.path} at +${seconds(s.at - startAt)}: ${s.status} ${s.text.slice(0, 200)}`;
      assert.deepEqual(monitor.of("/livez").filter((s) => s.status !== 200).map(show), [], "/livez is 200 throughout");
      assert.deepEqual(
        monitor.of("/readyz").filter((s) => !(s.status === 200 || (s.status === 503 && /cassandra|starting/i.test(s.json?.reason ?? "")))).map(show), [],
        "/readyz is 503 about cassandra (or starting) until it is 200",
      );
      const readyMs = readyAt - answersAt;
      assert.ok(readyMs <= READY_BOUND_MS, `ready ${readyMs} ms after Cassandra answered (bound ${READY_BOUND_MS} ms)`);

      // --- and it serves: an account, a key, a job done and charged ---
      const account = await call(api, "POST", "/admin/v1/accounts", { admin: true, body: { name: "late", balance: "1.00" } });
      assert.equal(account.status, 201, account.text);
      const key = await call(api, "POST", `/admin/v1/accounts/${account.json.account_id}/keys`, { admin: true, body: { models: ["*"] } });
      assert.equal(key.status, 201, key.text);
      const apiKey = key.json.api_key as string;
      assert.equal((await call(api, "GET", "/api/v1/models")).status, 200);
      const created = await call(api, "POST", "/api/v1/generations", {
        key: apiKey, headers: { "idempotency-key": "after-start" }, body: { model: "aimodel-2.5-flash-image", prompt: "late but fine" },
      });
      assert.equal(created.status, 202, created.text);
      const done = await eventually(() => call(api, "GET", `/api/v1/jobs/${created.json.job_id}`, { key: apiKey }), (r) => r.json?.status === "done", {
        timeoutMs: 30_000, what: "the job done",
      });
      assert.equal(done.json.usage.charged, "0.039");
      const balance = await call(api, "GET", "/api/v1/balance", { key: apiKey });
      assert.deepEqual(balance.json, { balance: "0.961", reserved: "0.00", available: "0.961", currency: "USD" });
      assert.ok(service.alive(), "never restarted");
      assert.equal(service.output().match(READY_LINES)?.length, 1);

      t.diagnostic(`gateway listening ${seconds(listeningAt - spawnedAt)} after spawn; the process ran ${seconds(startAt - spawnedAt)} without Cassandra before it was started; ` +
        `cassandra start (up.sh) ${seconds(startRun.ms)}, first CQL answer at +${seconds(answersAt - startAt)}`);
      t.diagnostic(`"ready" printed ${readyLineAt - answersAt} ms and /readyz 200 ${readyMs} ms after Cassandra first answered`);
    },
  );
});
