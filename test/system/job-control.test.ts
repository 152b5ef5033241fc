// backends: embedded, real
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BACKEND, call, eventually, pico, pooledBackendEnv, releaseRealBackend } from "../support/harness.js";
import { customerOf, startProcess, type ServiceProcess } from "../support/processes.js";
import { openSse } from "../support/sse-client.js";

/**
 * Watch and cancel across processes on Cassandra + Kafka (issue 10): the
 * job runs in a worker process while the client talks to an API process, so
 * every state change and every cancel crosses the Kafka lifecycle topic.
 */
const skip = BACKEND !== "real" && "needs TEST_BACKEND=real (Cassandra + Kafka)";

const SLOW = "[simulate:slow]";

describe("job control across processes", { skip }, () => {
  const processes: ServiceProcess[] = [];
  const envs: Record<string, string>[] = [];
  const start = async (env: Record<string, string>) => {
    const p = await startProcess(env);
    processes.push(p);
    return p;
  };
  // The processes of a test start side by side, as an operator's do: none waits for another to be ready.
  // A test's processes end with it: left running, each one's reaper and consumers load every later test.
  // Its keyspace then goes back to the pool at once, for the next test to take rather than create one.
  afterEach(async () => {
    await Promise.allSettled(processes.splice(0).map((p) => p.stop("SIGKILL")));
    await Promise.allSettled(envs.splice(0).map(async (env) => {
      await rm(env.DATA_DIR!, { recursive: true, force: true });
      await releaseRealBackend(env);
    }));
  });

  async function sharedEnv(extra: Record<string, string> = {}) {
    const env = {
      // A migrated keyspace from the pool: creating one per test cost seconds of Cassandra's CPU (test/support/keyspace-pool.ts).
      ...pooledBackendEnv(),
      DATA_DIR: await mkdtemp(join(tmpdir(), "gen-control-")),
      URL_SIGNING_SECRET: randomBytes(16).toString("hex"),
      REAPER_INTERVAL: "300ms",
      JOB_LEASE: "2s",
      ...extra,
    };
    envs.push(env);
    return env;
  }

  const customer = customerOf;

  const jobOf = (api: ServiceProcess, key: string, id: string) => call(api, "GET", `/api/v1/jobs/${id}`, { key });

  it("when a job runs in a worker process, then a watcher on an API process hears every state from the lifecycle topic, not from polling", async () => {
    const env = await sharedEnv({ SIMULATED_LATENCY_MS: "1500" });
    // The fallback read is a minute away: every event below reached the API process through Kafka.
    const [api] = await Promise.all([
      start({ ...env, ROLE: "api", WATCH_FALLBACK: "60s" }),
      start({ ...env, ROLE: "worker" }),
    ]);
    const key = await customer(api, "10.00");
    const created = await call(api, "POST", "/api/v1/generations", { key, body: { model: "aimodel-2.5-flash-image", prompt: "a kite", aspect_ratio: "1:1" } });
    assert.equal(created.status, 202, created.text);
    const id = created.json.job_id as string;
    const startedAt = Date.now();
    const stream = await openSse(`${api.url}/api/v1/jobs/${id}/events`, { authorization: `Bearer ${key}` });
    assert.equal(stream.status, 200);
    await stream.ended;
    assert.ok(Date.now() - startedAt < 45_000, "the stream ended long before a fallback read");
    assert.deepEqual(stream.events.map((e) => [e.id, JSON.parse(e.data).status]), [["1", "queued"], ["2", "processing"], ["3", "done"]]);
    assert.equal(JSON.parse(stream.events[2]!.data).usage.charged, "0.039");
  });

  it("when a processing text job is canceled through an API process, then the worker process aborts it and charges what was produced", async () => {
    const env = await sharedEnv({ SIMULATED_LATENCY_MS: "2000" });
    // A long grace: an answer well within it proves the worker itself aborted the job and recorded the cancellation.
    const [api] = await Promise.all([
      start({ ...env, ROLE: "api", CANCEL_GRACE: "60s" }),
      start({ ...env, ROLE: "worker" }),
    ]);
    const key = await customer(api, "10.00");
    const created = await call(api, "POST", "/api/v1/generations", { key, body: { model: "aimodel-3.5-flash", prompt: `Write an essay about tides ${SLOW}` } });
    assert.equal(created.status, 202, created.text);
    const id = created.json.job_id as string;
    await eventually(() => jobOf(api, key, id), (r) => r.json.status === "processing", { timeoutMs: 30_000, what: "processing" });
    const canceledAt = Date.now();
    const answer = await call(api, "POST", `/api/v1/jobs/${id}/cancel`, { key });
    assert.equal(answer.status, 200, answer.text);
    assert.ok(Date.now() - canceledAt < 20_000, "answered well within the grace");
    assert.equal(answer.json.status, "canceled");
    const charged = pico(answer.json.usage.charged);
    assert.ok(charged < pico(answer.json.usage.reserved), answer.text);
    const balance = (await call(api, "GET", "/api/v1/balance", { key })).json;
    assert.equal(pico(balance.balance), pico("10.00") - charged);
    assert.equal(balance.reserved, "0.00");
  });

  it("when the worker holding a processing job is dead, then a cancel ends the job itself after the grace, charging nothing", async () => {
    const env = await sharedEnv({ SIMULATED_LATENCY_MS: "2000", JOB_LEASE: "60s" });
    const [api, worker] = await Promise.all([
      start({ ...env, ROLE: "api", CANCEL_GRACE: "1s" }),
      start({ ...env, ROLE: "worker" }),
    ]);
    const key = await customer(api, "10.00");
    const created = await call(api, "POST", "/api/v1/generations", { key, body: { model: "aimodel-3-pro-image", prompt: `a kite ${SLOW}` } });
    const id = created.json.job_id as string;
    await eventually(() => jobOf(api, key, id), (r) => r.json.status === "processing", { timeoutMs: 30_000, what: "processing" });
    assert.equal(await worker.stop("SIGKILL"), "SIGKILL");
    const answer = await call(api, "POST", `/api/v1/jobs/${id}/cancel`, { key });
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.status, "canceled");
    assert.equal(answer.json.usage.charged, "0.00");
    assert.deepEqual((await call(api, "GET", "/api/v1/balance", { key })).json, { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
  });
});
