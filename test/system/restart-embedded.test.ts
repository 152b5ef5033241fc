// backends: embedded, real
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BACKEND, call, eventually, pico, TERMINAL } from "../support/harness.js";
import { startProcess, type ServiceProcess } from "../support/processes.js";

/**
 * Issue 7, "Done means": `npm start`, an account, a key, a job; SIGKILL;
 * `npm start` again with the same DATA_DIR: the same key works, the balance is
 * exact, the job is there and its link downloads. The real `src/main.ts` in a
 * child process, as an operator runs it.
 */
const skip = BACKEND === "real" && "about the embedded default (TEST_BACKEND=embedded)";

describe("the embedded default across a SIGKILL", { skip }, () => {
  const processes: ServiceProcess[] = [];
  let dataDir = "";
  after(async () => {
    await Promise.allSettled(processes.map((p) => p.stop("SIGKILL")));
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("when the process is killed and started again on its DATA_DIR, then the key works, the balance is exact and the job and its file are there", async () => {
    dataDir = await mkdtemp(join(tmpdir(), "gen-restart-"));
    const env = { DATA_DIR: dataDir, SIMULATED_LATENCY_MS: "50", REAPER_INTERVAL: "200ms" };
    const first = await startProcess(env);
    processes.push(first);
    const account = await call(first, "POST", "/admin/v1/accounts", { admin: true, body: { name: "me", balance: "10.00" } });
    assert.equal(account.status, 201, account.text);
    const key = await call(first, "POST", `/admin/v1/accounts/${account.json.account_id}/keys`, { admin: true, body: { models: ["*"] } });
    assert.equal(key.status, 201, key.text);
    const apiKey = key.json.api_key as string;
    const created = await call(first, "POST", "/api/v1/generations", {
      key: apiKey, body: { model: "aimodel-3-pro-image", prompt: "a lighthouse at dusk", aspect_ratio: "16:9", resolution: "2K" },
    });
    assert.equal(created.status, 202, created.text);
    const jobId = created.json.job_id as string;
    await eventually(() => call(first, "GET", `/api/v1/jobs/${jobId}`, { key: apiKey }), (r) => TERMINAL.has(r.json?.status), {
      what: "the job to finish",
    });
    const before = (await call(first, "GET", "/api/v1/balance", { key: apiKey })).json;

    assert.equal(await first.stop("SIGKILL"), "SIGKILL");
    const second = await startProcess(env);
    processes.push(second);

    const balance = await call(second, "GET", "/api/v1/balance", { key: apiKey });
    assert.equal(balance.status, 200, `the key still works after the restart: ${balance.text}`);
    assert.deepEqual(balance.json, before);
    assert.equal(pico(balance.json.balance), pico("10.00") - pico("0.134"), "charged the 2K price once");
    const job = await call(second, "GET", `/api/v1/jobs/${jobId}`, { key: apiKey });
    assert.equal(job.status, 200, job.text);
    assert.equal(job.json.status, "done");
    const file = await fetch(job.json.result.image_url);
    assert.equal(file.status, 200);
    const bytes = Buffer.from(await file.arrayBuffer());
    assert.equal(bytes.subarray(1, 4).toString("latin1"), "PNG", "the link downloads the PNG");
  });

  it("when a second process is started on a DATA_DIR in use, then it refuses to start and says why", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gen-locked-"));
    try {
      const owner = await startProcess({ DATA_DIR: dir });
      processes.push(owner);
      const intruder = startProcess({ DATA_DIR: dir });
      await assert.rejects(intruder, /in use by another process/);
      const still = await call(owner, "GET", "/readyz");
      assert.equal(still.status, 200, "the owner keeps serving");
      await owner.stop("SIGKILL");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
