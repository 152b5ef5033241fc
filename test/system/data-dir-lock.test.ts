// backends: embedded, real
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BACKEND, call, pico } from "../support/harness.js";
import { customerOf, startProcess, type ServiceProcess } from "../support/processes.js";
import { saidReady } from "../support/service-output.js";
import { spawnServiceChild } from "../support/service-child.js";

/**
 * Issue 34: removing `service.db.lock` (the usual reflex for a "stale lock") let a second process open the same
 * DATA_DIR, which released the first one's in-flight text streams. The lock is SQLite's own on service.db: nothing
 * to delete, and the kernel drops it when its process dies. The real `src/main.ts` in child processes.
 */
const skip = BACKEND === "real" && "about the embedded default (TEST_BACKEND=embedded)";

describe("one process per DATA_DIR", { skip }, () => {
  const processes: ServiceProcess[] = [];
  const directories: string[] = [];
  after(async () => {
    await Promise.allSettled(processes.map((p) => p.stop("SIGKILL")));
    for (const dir of directories) await rm(dir, { recursive: true, force: true });
  });

  async function freshDataDir() {
    const dir = await mkdtemp(join(tmpdir(), "gen-lock-"));
    directories.push(dir);
    return dir;
  }

  it("when a second process opens the same DATA_DIR after the lock file is removed, then it refuses to start, naming the DATA_DIR, and the first serves on", async () => {
    const dataDir = await freshDataDir();
    const first = await startProcess({ DATA_DIR: dataDir });
    processes.push(first);
    // The operator's reflex for a "stale lock": nothing may depend on that file existing.
    await rm(join(dataDir, "service.db.lock"), { force: true });

    const second = spawnServiceChild({ DATA_DIR: dataDir });
    let output = "";
    const exited = once(second, "exit").then(([code]) => code as number | null);
    // Whichever comes first: its exit, or its "ready" (then it is stopped, and the test fails).
    const served = new Promise<"ready">((resolve) => {
      const look = () => saidReady(output) && resolve("ready");
      second.stdout!.on("data", (chunk) => ((output += chunk), look()));
      second.stderr!.on("data", (chunk) => ((output += chunk), look()));
    });
    const code = await Promise.race([exited, served]);
    if (code === "ready") second.kill("SIGKILL");
    assert.notEqual(code, "ready", `the second process must not serve:\n${output}`);
    assert.equal(code, 1, output);
    assert.ok(output.includes(`DATA_DIR ${dataDir} is in use by another process (pid ${first.child.pid})`), output);

    const ready = await call(first, "GET", "/readyz");
    assert.equal(ready.status, 200, `the first process is untouched: ${ready.text}`);
  });

  it("when the holder is SIGKILLed, then a new process starts on the same DATA_DIR with its data", async () => {
    const dataDir = await freshDataDir();
    const first = await startProcess({ DATA_DIR: dataDir });
    processes.push(first);
    const apiKey = await customerOf(first, "7.00");
    assert.equal(await first.stop("SIGKILL"), "SIGKILL");

    const next = await startProcess({ DATA_DIR: dataDir });
    processes.push(next);
    const balance = await call(next, "GET", "/api/v1/balance", { key: apiKey });
    assert.equal(balance.status, 200, balance.text);
    assert.equal(pico(balance.json.balance), pico("7.00"));
  });
});
