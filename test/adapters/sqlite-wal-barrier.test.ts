// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { walBarrier } from "../../src/adapters/sqlite/wal-barrier.js";
import { openSqliteStores } from "../../src/adapters/sqlite/sqlite-stores.js";
import { isDependencyUnavailable } from "../../src/ports/dependency.js";

/** A sync the test releases by hand, counting how often it ran. */
function manualSync() {
  const releases: (() => void)[] = [];
  let started = 0;
  return {
    get started() { return started; },
    sync: () => { started++; return new Promise<void>((resolve) => releases.push(resolve)); },
    release: () => releases.shift()?.(),
  };
}

const settled = async (promise: Promise<unknown>) => {
  let done = false;
  void promise.then(() => (done = true), () => (done = true));
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  return done;
};

describe("group commit: the WAL barrier", () => {
  it("when flushes are asked while one is in flight, then they share the next one, which starts only after it", async () => {
    const manual = manualSync();
    const barrier = walBarrier("unused", manual.sync);
    const first = barrier.flush();
    const second = barrier.flush();
    const third = barrier.flush();
    assert.equal(manual.started, 1, "one sync runs at a time");
    manual.release();
    assert.equal(await settled(first), true, "the first caller's sync is done");
    assert.equal(await settled(second), false, "a caller who came during the first sync waits for one that started after its commit");
    assert.equal(manual.started, 2, "the waiting callers share a single next sync");
    manual.release();
    assert.equal(await settled(second), true);
    assert.equal(await settled(third), true);
    assert.equal(manual.started, 2);
  });

  it("when the sync fails, then the caller gets DependencyUnavailableError and the next flush tries again", async () => {
    const dir = await mkdtemp(join(tmpdir(), "wal-barrier-"));
    try {
      // A directory where the WAL should be: opening it for writing fails.
      const { mkdir } = await import("node:fs/promises");
      await mkdir(join(dir, "db-wal"));
      const barrier = walBarrier(join(dir, "db"));
      await assert.rejects(barrier.flush(), (error) => isDependencyUnavailable(error));
      await assert.rejects(barrier.flush(), (error) => isDependencyUnavailable(error));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("when the store runs with SQLITE_SYNCHRONOUS=full, then commits go without an fsync each and flush() syncs the real WAL", async () => {
    const dir = await mkdtemp(join(tmpdir(), "wal-barrier-"));
    const opened = await openSqliteStores({ dataDir: dir, synchronous: "full", defaultPrices: new Map() });
    try {
      assert.equal(opened.database.db.pragma("synchronous", { simple: true }), 1, "NORMAL per commit: the barrier does the syncing");
      await opened.stores.ledger.createAccount("acct", "x", 5n);
      await opened.barrier.flush();
      assert.deepEqual(await opened.stores.ledger.balance("acct"), { balance: 5n, reserved: 0n });
    } finally {
      await opened.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
