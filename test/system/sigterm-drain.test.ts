// backends: embedded, real
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BACKEND, call, eventually } from "../support/harness.js";
import { startProcess, type ServiceProcess } from "../support/processes.js";

/**
 * Issue 7: "SIGTERM turns /readyz to 503 before it stops accepting, so a load
 * balancer drains it." The real `src/main.ts` and a real signal.
 */
const skip = BACKEND === "real" && "runs once, on the embedded default";

describe("SIGTERM drains before it stops", { skip }, () => {
  let service: ServiceProcess | undefined;
  let dataDir = "";
  after(async () => {
    await service?.stop("SIGKILL");
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("when the process gets SIGTERM, then /readyz answers 503 draining while requests are still served for DRAIN_DELAY, then it exits 0", async () => {
    dataDir = await mkdtemp(join(tmpdir(), "gen-drain-"));
    service = await startProcess({ DATA_DIR: dataDir, DRAIN_DELAY: "3s" });
    assert.equal((await call(service, "GET", "/readyz")).status, 200);
    service.child.kill("SIGTERM");
    const draining = await eventually(() => call(service!, "GET", "/readyz"), (r) => r.status === 503, { what: "/readyz to turn 503" });
    assert.equal(draining.json.status, "draining", draining.text);
    assert.ok(draining.headers.get("retry-after"));
    const models = await call(service, "GET", "/api/v1/models");
    assert.equal(models.status, 200, "still served while the load balancer drains the process");
    assert.equal((await call(service, "GET", "/livez")).status, 200);
    assert.equal(await service.exited, 0, "a graceful stop exits 0");
    assert.match(service.output(), /"signal":"SIGTERM","msg":"stopping"[\s\S]*"msg":"stopped"/);
  });

  it("when SIGINT comes twice at once (a terminal's Ctrl-C that `npm start` forwards too), then the process stops once, without the drain delay, and exits 0", async () => {
    await service?.stop("SIGKILL");
    service = await startProcess({ DATA_DIR: dataDir, DRAIN_DELAY: "60s" });
    const started = performance.now();
    service.child.kill("SIGINT");
    service.child.kill("SIGINT");
    assert.equal(await service.exited, 0, "a repeated signal is the same stop, not a reason to exit 1");
    assert.ok(performance.now() - started < 30_000, "stopped without the 60 s drain delay");
    const output = service.output();
    assert.equal(output.match(/"msg":"stopping"/g)?.length, 1, output);
    assert.match(output, /"signal":"SIGINT","msg":"stopping"[\s\S]*"msg":"stopped"/);
  });

  it("when the process gets SIGHUP, then it stops as on SIGINT, without the drain delay, and exits 0", async () => {
    await service?.stop("SIGKILL");
    service = await startProcess({ DATA_DIR: dataDir, DRAIN_DELAY: "60s" });
    const started = performance.now();
    service.child.kill("SIGHUP");
    assert.equal(await service.exited, 0);
    assert.ok(performance.now() - started < 30_000, "stopped without the 60 s drain delay");
    assert.match(service.output(), /"signal":"SIGHUP","msg":"stopping"[\s\S]*"msg":"stopped"/);
  });
});
