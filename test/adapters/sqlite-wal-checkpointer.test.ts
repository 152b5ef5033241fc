import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqliteStores } from "../../src/adapters/sqlite/sqlite-stores.js";
import { FALLBACK_AUTOCHECKPOINT_PAGES } from "../../src/adapters/sqlite/wal-checkpointer.js";
import { parsePriceTable } from "../../src/domain/pricing/price-table.js";

const PRICES = parsePriceTable({ "aimodel-3-pro-image": { per_image: { "1K": "0.134", "2K": "0.134", "4K": "0.24" } } });

async function until(condition: () => boolean, what: string, deadlineMs = 10_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("SQLite checkpoints on a thread of their own", () => {
  it("when commits fill the WAL, then a thread copies them into the database file and the service's connection only checkpoints past the fallback", async () => {
    const dir = await mkdtemp(join(tmpdir(), "wal-checkpointer-"));
    const stores = await openSqliteStores({ dataDir: dir, synchronous: "full", defaultPrices: PRICES, checkpointIntervalMs: 20 });
    try {
      const { db } = stores.database;
      assert.equal(db.pragma("wal_autocheckpoint", { simple: true }), FALLBACK_AUTOCHECKPOINT_PAGES);
      const before = statSync(stores.path).size;
      db.exec("CREATE TABLE scratch (id INTEGER PRIMARY KEY, filler TEXT NOT NULL)");
      const insert = db.prepare("INSERT INTO scratch (filler) VALUES (?)");
      // About 2 MB in 200 commits: far below the fallback (16,384 pages), so only the thread can move it.
      for (let i = 0; i < 200; i++) insert.run("x".repeat(10_000));
      await until(() => statSync(stores.path).size >= before + 2_000_000, "the database file holds the rows");
    } finally {
      await stores.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("when the stores close, then the thread's connection is closed first and the last close checkpoints and removes the WAL", async () => {
    const dir = await mkdtemp(join(tmpdir(), "wal-checkpointer-"));
    const stores = await openSqliteStores({ dataDir: dir, synchronous: "full", defaultPrices: PRICES, checkpointIntervalMs: 60_000 });
    const { db } = stores.database;
    db.exec("CREATE TABLE scratch (id INTEGER PRIMARY KEY, filler TEXT NOT NULL)");
    db.prepare("INSERT INTO scratch (filler) VALUES (?)").run("kept");
    assert.equal(existsSync(`${stores.path}-wal`), true, "the row is in the WAL");
    await stores.close();
    try {
      assert.equal(existsSync(`${stores.path}-wal`), false, "the main connection closed last: it checkpointed and deleted the WAL");
      const reopened = await openSqliteStores({ dataDir: dir, synchronous: "full", defaultPrices: PRICES });
      try {
        assert.deepEqual(reopened.database.db.prepare("SELECT filler FROM scratch").all(), [{ filler: "kept" }]);
      } finally {
        await reopened.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
