import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { loadConfig } from "../../src/config/config.js";

const cassandra = { CASSANDRA_CONTACT_POINTS: "127.0.0.1:9042", KAFKA_BROKERS: "127.0.0.1:9092", WORKER_ID: "w-1" };

describe("config: one writer per account (CLUSTER_SECRET, LEDGER_PEER_*)", () => {
  it("when neither is set, then every operation is committed locally (no affinity)", () => {
    assert.equal(loadConfig(cassandra).cassandra?.ledgerAffinity, undefined);
  });

  it("when only CLUSTER_SECRET is set, then the process forwards and serves no peer endpoint", () => {
    assert.deepEqual(loadConfig({ ...cassandra, CLUSTER_SECRET: "s".repeat(16) }).cassandra?.ledgerAffinity, { secret: "s".repeat(16), memberId: "w-1" });
  });

  it("when LEDGER_PEER_PORT is set too, then it serves there, advertised as LEDGER_PEER_ADVERTISE or its host", () => {
    const serve = (env: Record<string, string>) => loadConfig({ ...cassandra, CLUSTER_SECRET: "s".repeat(16), ...env }).cassandra?.ledgerAffinity?.serve;
    assert.deepEqual(serve({ LEDGER_PEER_PORT: "7000" }), { host: "127.0.0.1", port: 7000, advertise: "127.0.0.1" });
    assert.deepEqual(serve({ LEDGER_PEER_PORT: "0", LEDGER_PEER_HOST: "10.0.0.5", LEDGER_PEER_ADVERTISE: "api-1.internal" }), {
      host: "10.0.0.5", port: 0, advertise: "api-1.internal",
    });
  });

  it("when LEDGER_PEER_PORT is set without a secret of 16 characters or more, or would be advertised as a wildcard address, then the process refuses to start and says why", () => {
    assert.throws(() => loadConfig({ ...cassandra, LEDGER_PEER_PORT: "7000" }), /CLUSTER_SECRET/);
    assert.throws(() => loadConfig({ ...cassandra, LEDGER_PEER_PORT: "7000", CLUSTER_SECRET: "short" }), /16 characters/);
    assert.throws(() => loadConfig({ ...cassandra, CLUSTER_SECRET: "short" }), /16 characters/);
    assert.throws(() => loadConfig({ ...cassandra, CLUSTER_SECRET: "s".repeat(16), LEDGER_PEER_PORT: "7000", LEDGER_PEER_HOST: "0.0.0.0" }), /LEDGER_PEER_ADVERTISE/);
  });
});
