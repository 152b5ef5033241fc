// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqliteStores } from "../../src/adapters/sqlite/sqlite-stores.js";
import Database from "better-sqlite3";
import { FALLBACK_AUTOCHECKPOINT_PAGES, startWalCheckpointer } from "../../src/adapters/sqlite/wal-checkpointer.js";
import { parsePriceTable } from "../../src/domain/pricing/price-table.js";
import { eventually } from "../support/eventually.js";

const PRICES = parsePriceTable({ "aimodel-3-pro-image": { per_image: { "1K": "0.134", "2K": "0.134", "4K": "0.24" } } });

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
      await eventually(() => statSync(stores.path).size >= before + 2_000_000, Boolean, { what: "the database file holds the rows", timeoutMs: 10_000 });
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

  it("when checkpoints keep failing, then the failure is told when it starts and then at most once per period with its count, and its end once", async () => {
    const dir = await mkdtemp(join(tmpdir(), "wal-checkpointer-"));
    const path = join(dir, "test.db");
    const db = new Database(path);
    db.pragma("journal_mode = WAL");
    const errors: { message: string; failures: number }[] = [];
    const recoveries: number[] = [];
    // The statement fails until the test creates its table: a checkpoint failing at every attempt, 10 ms apart.
    const checkpointer = startWalCheckpointer({
      path, synchronous: "normal", intervalMs: 10, reportEveryMs: 300, statement: "SELECT COUNT(*) FROM checkpoints_allowed",
      onError: (message, failures) => errors.push({ message, failures }),
      onRecovered: (failures) => recoveries.push(failures),
    });
    try {
      await eventually(() => errors.length >= 2, Boolean, { what: "a second report", timeoutMs: 10_000 });
      assert.equal(errors[0]!.failures, 1, "told when it starts");
      assert.match(errors[0]!.message, /no such table/);
      // Reported once per 300 ms while attempts run every 10 ms: the second report counts many failures.
      assert.ok(errors[1]!.failures >= 10, `the second report counts ${errors[1]!.failures} failures`);
      db.exec("CREATE TABLE checkpoints_allowed (id INTEGER)");
      await eventually(() => recoveries.length === 1, Boolean, { what: "the recovery", timeoutMs: 10_000 });
      assert.ok(recoveries[0]! >= errors[1]!.failures, `recovered after ${recoveries[0]} failures`);
      const reports = errors.length;
      // Working again: no more reports (the next failure would be told at once, as a start).
      db.exec("DROP TABLE checkpoints_allowed");
      await eventually(() => errors.length === reports + 1, Boolean, { what: "the next failure, told at once", timeoutMs: 10_000 });
      assert.equal(errors[reports]!.failures, 1);
    } finally {
      await checkpointer.close();
      db.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
