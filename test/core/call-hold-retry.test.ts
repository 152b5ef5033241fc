// backends: embedded
/**
 * A synchronous call's hold whose settlement the store refuses (a node down, a timeout) is settled again in the
 * background (endCallHold), instead of staying reserved until the reaper's TEXT_CALL_LIMIT: found by the chaos run
 * (docs/chaos.md), where a Cassandra node killed under streamed text calls left their holds reserved.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqliteStores } from "../../src/adapters/sqlite/sqlite-stores.js";
import { endCallHold, takeHold } from "../../src/core/money/holds.js";
import { parsePriceTable } from "../../src/domain/pricing/price-table.js";
import { DependencyUnavailableError } from "../../src/ports/dependency.js";
import type { IntentHolds } from "../../src/ports/intent-holds.js";
import { silentLogger } from "../../src/ports/logger.js";
import { noTelemetry } from "../../src/ports/telemetry.js";
import { eventually } from "../support/eventually.js";

const dir = mkdtempSync(join(tmpdir(), "call-hold-retry-"));
const opened = await openSqliteStores({
  dataDir: dir,
  synchronous: "full",
  defaultPrices: parsePriceTable({ "aimodel-3.5-flash": { input_per_million_tokens: "0.30", output_per_million_tokens: "2.50" } }),
});
const { stores } = opened;
after(async () => {
  await opened.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The real SQLite holds, whose first `failures` settlements fail as a store that cannot be reached does. */
function failingFirst(real: IntentHolds, failures: number): IntentHolds & { attempts: () => number } {
  let attempts = 0;
  return Object.assign(Object.create(real) as IntentHolds, {
    endAndFinalize: (...args: Parameters<IntentHolds["endAndFinalize"]>) => {
      attempts++;
      if (attempts <= failures) return Promise.reject(new DependencyUnavailableError("cassandra", "write timed out"));
      return real.endAndFinalize(...args);
    },
    attempts: () => attempts,
  });
}

const MEMO = { model: "aimodel-3.5-flash", keyId: "key_1" };

describe("a synchronous call's hold the store fails to end", () => {
  it("when the store refuses a call's charge twice, then it is made in the background, once, and nothing stays reserved", async () => {
    await stores.ledger.createAccount("acct_charge", "one", 1_000_000n);
    const holds = failingFirst(stores.intentHolds, 2);
    const ports = { ...stores, acceptanceWrites: opened.acceptanceWrites, intentHolds: holds, logger: silentLogger, telemetry: noTelemetry };
    assert.equal(await takeHold(ports, "acct_charge", "call-a", 400_000n, new Date(), MEMO), "reserved");
    const charged = await endCallHold(ports, "acct_charge", "call-a", { amount: 150_000n }, "nothing_delivered");
    assert.equal(charged, undefined, "the answer does not wait for the retries");
    const settled = await eventually(() => stores.ledger.balance("acct_charge"), (balance) => balance?.reserved === 0n, { what: "the charge" });
    assert.deepEqual(settled, { balance: 850_000n, reserved: 0n });
    assert.equal(holds.attempts(), 3);
    const charges = (await stores.ledger.entries({ accountId: "acct_charge", limit: 10 })).entries.filter((entry) => entry.type === "charge");
    assert.deepEqual(charges.map((entry) => entry.amount), [-150_000n]);
  });

  it("when the store refuses a call's release once, then the release is made in the background and the whole hold is available again", async () => {
    await stores.ledger.createAccount("acct_release", "two", 1_000_000n);
    const holds = failingFirst(stores.intentHolds, 1);
    const ports = { ...stores, acceptanceWrites: opened.acceptanceWrites, intentHolds: holds, logger: silentLogger, telemetry: noTelemetry };
    assert.equal(await takeHold(ports, "acct_release", "call-b", 400_000n, new Date(), MEMO), "reserved");
    assert.deepEqual(await stores.ledger.balance("acct_release"), { balance: 1_000_000n, reserved: 400_000n });
    await endCallHold(ports, "acct_release", "call-b", undefined, "nothing_delivered");
    const released = await eventually(() => stores.ledger.balance("acct_release"), (balance) => balance?.reserved === 0n, { what: "the release" });
    assert.deepEqual(released, { balance: 1_000_000n, reserved: 0n });
    assert.equal(holds.attempts(), 2);
  });
});
