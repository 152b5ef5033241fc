// backends: embedded, real
import { after, afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BACKEND, call, dropRealBackend, eventually, pooledBackendEnv, realBackendEnv, releaseRealBackend, TERMINAL } from "../support/harness.js";
import { customerOf, startProcess, type ServiceProcess } from "../support/processes.js";
import { assertLedgerReconciles } from "../support/ledger-helpers.js";

/**
 * Several real processes of the service against the same Cassandra and Kafka,
 * as an operator runs them: API processes, workers and webhook dispatchers,
 * killed and restarted. Only meaningful on the real backend.
 */
const skip = BACKEND !== "real" && "needs TEST_BACKEND=real (Cassandra + Kafka)";

/**
 * A keyspace from the pool (test/support/keyspace-pool.ts), or with `fresh` a new one, which the processes starting at
 * once create and migrate side by side, as on a new cluster.
 */
async function sharedEnv(extra: Record<string, string> = {}, fresh = false) {
  const dataDir = await mkdtemp(join(tmpdir(), "gen-processes-"));
  return remember(fresh, {
    ...(fresh ? realBackendEnv() : pooledBackendEnv()),
    DATA_DIR: dataDir,
    URL_SIGNING_SECRET: randomBytes(16).toString("hex"),
    ALLOW_PRIVATE_URLS: "true",
    REAPER_INTERVAL: "300ms",
    JOB_LEASE: "2s",
    REQUEUE_AFTER: "3s",
    WEBHOOK_RETRY_SCHEDULE: "100ms,200ms",
    ...extra,
  });
}

const created: { env: Record<string, string>; fresh: boolean }[] = [];
function remember<T extends Record<string, string>>(fresh: boolean, env: T): T {
  created.push({ env, fresh });
  return env;
}

const customer = customerOf;

const jobOf = (api: ServiceProcess, key: string, id: string) => call(api, "GET", `/api/v1/jobs/${id}`, { key });
const balanceOf = async (api: ServiceProcess, key: string) => (await call(api, "GET", "/api/v1/balance", { key })).json;

/** A local webhook receiver counting deliveries per job. */
async function receiver() {
  const deliveries: { job_id: string; status: string }[] = [];
  const server: Server = createServer((request, response) => {
    let body = "";
    request.on("data", (c) => (body += c));
    request.on("end", () => {
      deliveries.push(JSON.parse(body));
      response.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, deliveries, close: () => server.close() };
}

describe("several processes on one Cassandra and Kafka", { skip }, () => {
  const processes: ServiceProcess[] = [];
  const dirs: string[] = [];
  const start = async (env: Record<string, string>) => {
    const p = await startProcess(env);
    processes.push(p);
    return p;
  };
  // A test's processes end with it: left running, each one's reaper, heartbeats and consumers load every later test.
  // Its keyspace then goes back to the pool at once, for the next test to take rather than create one.
  afterEach(async () => {
    await Promise.allSettled(processes.splice(0).map((p) => p.stop("SIGKILL")));
    await Promise.allSettled(created.splice(0).map(({ env, fresh }) => (fresh ? dropRealBackend(env) : releaseRealBackend(env))));
  });
  after(async () => {
    await Promise.allSettled(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });

  // Both races run on one set of processes (a new keyspace they migrate side by side): starting them is most of the cost.
  it("200 concurrent creations through two API processes against funds for exactly 50, then against a key's spend limit for exactly 50: 50 accepted and 150 refused each time, balances exact", async () => {
    const env = await sharedEnv({ SIMULATED_LATENCY_MS: "20" }, true);
    dirs.push(env.DATA_DIR);
    const [api1, api2] = await Promise.all([
      start({ ...env, ROLE: "api" }),
      start({ ...env, ROLE: "api" }),
      start({ ...env, ROLE: "worker" }),
      start({ ...env, ROLE: "webhooks" }),
    ]);
    /** 200 creations at once, alternating between the API processes: the refusals, and the accepted jobs once done. */
    const race = async (key: string) => {
      const responses = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          call(i % 2 ? api2! : api1!, "POST", "/api/v1/generations", { key, body: { model: "aimodel-2.5-flash-image", prompt: `race ${i}` } }),
        ),
      );
      const statuses = responses.map((r) => r.status);
      assert.equal(statuses.filter((s) => s === 202).length, 50, `statuses: ${JSON.stringify(statuses)}`);
      assert.equal(statuses.filter((s) => s === 402).length, 150);
      const ids = responses.filter((r) => r.status === 202).map((r) => r.json.job_id as string);
      assert.equal(new Set(ids).size, 50);
      await eventually(
        () => Promise.all(ids.map((id, i) => jobOf(i % 2 ? api1! : api2!, key, id))),
        (jobs) => jobs.every((j) => j.json.status === "done"),
        { timeoutMs: 60_000, intervalMs: 250, what: "all 50 jobs done" },
      );
      return responses.filter((r) => r.status === 402);
    };

    const poor = await customer(api1!, "1.95"); // 50 × 0.039
    await race(poor);
    assert.deepEqual(await balanceOf(api2!, poor), { balance: "0.00", reserved: "0.00", available: "0.00", currency: "USD" });
    // The statement, written by two API processes and a worker at once, reconciles to the cent: 50 holds, 50 charges, nothing else.
    const entries = await assertLedgerReconciles(api1!, { key: poor });
    assert.equal(entries.filter((e) => e.type === "hold").length, 50);
    assert.equal(entries.filter((e) => e.type === "charge").length, 50);

    // A key's spend limit, the balance far larger.
    const account = await call(api1!, "POST", "/admin/v1/accounts", { admin: true, body: { name: "p", balance: "100.00" } });
    const created = await call(api1!, "POST", `/admin/v1/accounts/${account.json.account_id}/keys`, {
      admin: true, body: { models: ["*"], spend_limit: "1.95" }, // 50 × 0.039
    });
    assert.equal(created.status, 201, created.text);
    const limited = created.json.api_key as string;
    const refused = await race(limited);
    assert.ok(refused.every((r) => r.json.error.code === "key_spend_limit_exceeded"));
    assert.deepEqual(await balanceOf(api2!, limited), { balance: "98.05", reserved: "0.00", available: "98.05", currency: "USD" });
    const standing = await call(api2!, "GET", `/admin/v1/keys/${created.json.key_id}`, { admin: true });
    assert.deepEqual([standing.json.spent, standing.json.remaining, standing.json.held], ["1.95", "0.00", "0.00"]);
    await assertLedgerReconciles(api1!, { key: limited });
  });

  it("a worker killed with SIGKILL mid-job: another worker finishes it, once, charged once, one webhook", async () => {
    const env = await sharedEnv({ SIMULATED_LATENCY_MS: "1500" });
    dirs.push(env.DATA_DIR);
    const hooks = await receiver();
    try {
      const [api, workerA] = await Promise.all([
        start({ ...env, ROLE: "api,webhooks" }),
        start({ ...env, ROLE: "worker", WORKER_ID: "worker-a" }),
      ]);
      const key = await customer(api, "1.00");
      const created = await call(api, "POST", "/api/v1/generations", {
        key,
        body: { model: "aimodel-3-pro-image", prompt: "survives a crash", callback_url: hooks.url },
      });
      assert.equal(created.status, 202, created.text);
      const id = created.json.job_id as string;
      await eventually(() => jobOf(api, key, id), (r) => r.json.status === "processing", { timeoutMs: 30_000, what: "processing" });
      assert.equal(await workerA.stop("SIGKILL"), "SIGKILL");

      await start({ ...env, ROLE: "worker", WORKER_ID: "worker-b" });
      const done = await eventually(() => jobOf(api, key, id), (r) => TERMINAL.has(r.json.status), { timeoutMs: 45_000, what: "done" });
      assert.equal(done.json.status, "done");
      assert.equal(done.json.usage.charged, "0.134");
      assert.deepEqual(await balanceOf(api, key), { balance: "0.866", reserved: "0.00", available: "0.866", currency: "USD" });
      await eventually(async () => hooks.deliveries.length, (n) => n >= 1, { timeoutMs: 20_000, what: "the webhook" });
      // A second job through the same dispatcher proves it has moved on; the first still has exactly one delivery.
      const second = await call(api, "POST", "/api/v1/generations", {
        key, body: { model: "aimodel-2.5-flash-image", prompt: "after", callback_url: hooks.url },
      });
      await eventually(async () => hooks.deliveries.some((d) => d.job_id === second.json.job_id), Boolean, { timeoutMs: 30_000, what: "second webhook" });
      assert.equal(hooks.deliveries.filter((d) => d.job_id === id).length, 1);
      assert.equal(hooks.deliveries.find((d) => d.job_id === id)!.status, "success");
    } finally {
      hooks.close();
    }
  });

  it("killing every process and starting them again loses no accepted job and no money", async () => {
    const env = await sharedEnv({ SIMULATED_LATENCY_MS: "1000" });
    dirs.push(env.DATA_DIR);
    let api = await start({ ...env, ROLE: "all" });
    const key = await customer(api, "2.00");
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await call(api, "POST", "/api/v1/generations", { key, body: { model: "aimodel-nbx-2.1", prompt: `job ${i}`, aspect_ratio: "1:1", resolution: "1K" } });
      assert.equal(r.status, 202, r.text);
      ids.push(r.json.job_id);
    }
    assert.equal((await balanceOf(api, key)).reserved, "0.30"); // 6 × 0.05 held
    assert.equal(await api.stop("SIGKILL"), "SIGKILL");

    api = await start({ ...env, ROLE: "all" });
    await eventually(
      () => Promise.all(ids.map((id) => jobOf(api, key, id))),
      (jobs) => jobs.every((j) => j.json.status === "done"),
      { timeoutMs: 60_000, intervalMs: 250, what: "every job done after the restart" },
    );
    assert.deepEqual(await balanceOf(api, key), { balance: "1.70", reserved: "0.00", available: "1.70", currency: "USD" });
    // Killed between movements and the copies of their entries: the statement still has every one of them.
    const entries = await assertLedgerReconciles(api, { key });
    assert.equal(entries.filter((e) => e.type === "charge").length, 6);
  });

  it("an API process killed in the middle of a synchronous text call leaves no hold behind: the reaper releases it", async () => {
    const env = await sharedEnv({ SIMULATED_LATENCY_MS: "20000", TEXT_CALL_LIMIT: "3s" });
    dirs.push(env.DATA_DIR);
    let [api] = await Promise.all([
      start({ ...env, ROLE: "api" }),
      start({ ...env, ROLE: "worker" }),
    ]);
    const key = await customer(api, "1.00");
    const controller = new AbortController();
    const stream = fetch(`${api.url}/api/aimodel/v1beta/models/aimodel-3.5-flash:streamGenerateContent?alt=sse`, {
      method: "POST",
      headers: { "x-vendor-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "a long answer, please" }] }] }),
      signal: controller.signal,
    }).catch(() => undefined);
    await eventually(() => balanceOf(api, key), (b) => b.reserved !== "0.00", { timeoutMs: 20_000, what: "the call's hold" });
    assert.equal(await api.stop("SIGKILL"), "SIGKILL");
    controller.abort();
    await stream;
    api = await start({ ...env, ROLE: "api" });
    const after = await eventually(() => balanceOf(api, key), (b) => b.reserved === "0.00", { timeoutMs: 30_000, what: "the hold released" });
    assert.deepEqual(after, { balance: "1.00", reserved: "0.00", available: "1.00", currency: "USD" });
  });

  it("SIGTERM lets a worker finish its job within the grace period and exit cleanly", async () => {
    const env = await sharedEnv({ SIMULATED_LATENCY_MS: "1000", SHUTDOWN_GRACE: "20s" });
    dirs.push(env.DATA_DIR);
    const [api, worker] = await Promise.all([
      start({ ...env, ROLE: "api,webhooks" }),
      start({ ...env, ROLE: "worker" }),
    ]);
    const key = await customer(api, "1.00");
    const created = await call(api, "POST", "/api/v1/generations", { key, body: { model: "aimodel-2.5-flash-image", prompt: "graceful" } });
    await eventually(() => jobOf(api, key, created.json.job_id), (r) => r.json.status === "processing", { timeoutMs: 30_000, what: "processing" });
    assert.equal(await worker.stop("SIGTERM"), 0);
    const job = await jobOf(api, key, created.json.job_id);
    assert.equal(job.json.status, "done", "the job finished before the worker exited");
    assert.equal((await balanceOf(api, key)).balance, "0.961");
  });

  it("SIGTERM with a job longer than the grace period hands it back; the next worker finishes it at once", async () => {
    const env = await sharedEnv({ SIMULATED_LATENCY_MS: "3000", SHUTDOWN_GRACE: "100ms", JOB_LEASE: "60s" });
    dirs.push(env.DATA_DIR);
    const [api, worker] = await Promise.all([
      start({ ...env, ROLE: "api,webhooks" }),
      start({ ...env, ROLE: "worker" }),
    ]);
    const key = await customer(api, "1.00");
    const created = await call(api, "POST", "/api/v1/generations", { key, body: { model: "aimodel-2.5-flash-image", prompt: "handed back" } });
    await eventually(() => jobOf(api, key, created.json.job_id), (r) => r.json.status === "processing", { timeoutMs: 30_000, what: "processing" });
    assert.equal(await worker.stop("SIGTERM"), 0);
    assert.equal((await jobOf(api, key, created.json.job_id)).json.status, "processing");
    // With a 60 s lease, finishing well before that shows the lease was handed back, not waited out.
    const startedAt = Date.now();
    await start({ ...env, ROLE: "worker" });
    const done = await eventually(() => jobOf(api, key, created.json.job_id), (r) => r.json.status === "done", { timeoutMs: 40_000, what: "done" });
    assert.equal(done.json.usage.charged, "0.039");
    assert.ok(Date.now() - startedAt < 40_000);
    assert.equal((await balanceOf(api, key)).balance, "0.961");
  });
});
