// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { loadConfig } from "../../src/config/config.js";

const base = { URL_SIGNING_SECRET: "test", DATA_DIR: tmpdir() };

describe("config: the admin token's length (ADMIN_TOKEN, ALLOW_WEAK_ADMIN_TOKEN)", () => {
  it("when ADMIN_TOKEN has 31 characters, then the configuration is refused; with 32 it is taken as it is", () => {
    assert.throws(() => loadConfig({ ...base, ADMIN_TOKEN: "a".repeat(31) }));
    assert.equal(loadConfig({ ...base, ADMIN_TOKEN: "a".repeat(32) }).adminToken, "a".repeat(32));
  });

  it("when ALLOW_WEAK_ADMIN_TOKEN=true, then a short token is taken (development)", () => {
    assert.equal(loadConfig({ ...base, ADMIN_TOKEN: "dev", ALLOW_WEAK_ADMIN_TOKEN: "true" }).adminToken, "dev");
  });

  it("when ADMIN_TOKEN is not set, then the token made up for the run is 32 characters or more", () => {
    const config = loadConfig(base);
    assert.ok(config.adminTokenGenerated);
    assert.ok(config.adminToken.length >= 32, config.adminToken);
  });

  it("when AUTH_FAILURE_LIMIT and AUTH_FAILURE_WINDOW are not set, then 20 failures a minute; set, they are taken", () => {
    assert.deepEqual(loadConfig(base).authFailures, { limit: 20, windowMs: 60_000, maxClients: 100_000 });
    assert.deepEqual(loadConfig({ ...base, AUTH_FAILURE_LIMIT: "5", AUTH_FAILURE_WINDOW: "10m" }).authFailures, { limit: 5, windowMs: 600_000, maxClients: 100_000 });
    assert.throws(() => loadConfig({ ...base, AUTH_FAILURE_LIMIT: "0" }));
  });
});
