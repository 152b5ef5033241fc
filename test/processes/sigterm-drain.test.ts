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
});
