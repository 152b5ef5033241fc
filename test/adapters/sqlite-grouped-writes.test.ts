// backends: embedded
/**
 * Group commit on the event loop (src/adapters/sqlite/grouped-writes.ts):
 * writes asked for in one turn share one transaction, each keeps its own
 * outcome, and a failed group keeps nothing.
 */
import { after, describe, it } from "node:test";
import { AsyncLocalStorage } from "node:async_hooks";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GroupedWrites } from "../../src/adapters/sqlite/grouped-writes.js";
import { DependencyUnavailableError } from "../../src/ports/dependency.js";

const directories: string[] = [];
after(() => {
  for (const dir of directories) rmSync(dir, { recursive: true, force: true });
});

function freshDb() {
  const dir = mkdtempSync(join(tmpdir(), "grouped-writes-"));
  directories.push(dir);
  const db = new Database(join(dir, "test.db"));
  db.pragma("journal_mode = WAL");
  db.exec(`
    CREATE TABLE notes (seq INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
    CREATE TABLE parents (id INTEGER PRIMARY KEY);
    CREATE TABLE children (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED);
  `);
  db.pragma("foreign_keys = ON");
  const insert = db.prepare("INSERT INTO notes (text) VALUES (?)");
  const note = db.transaction((text: string) => Number(insert.run(text).lastInsertRowid));
  const texts = () => (db.prepare("SELECT text FROM notes ORDER BY seq").pluck().all() as string[]);
  return { dir, db, note, texts };
}

describe("GroupedWrites", () => {
  it("when writes are asked in one turn of the event loop, then they commit in one transaction, in the order asked, each caller getting its own result", async () => {
    const { db, note, texts } = freshDb();
    const commits: number[] = [];
    const writes = new GroupedWrites(db, { onCommit: (n) => commits.push(n) });
    const results = await Promise.all(["a", "b", "c"].map((text) => writes.run(() => note(text))));
    assert.deepEqual(commits, [3]);
    assert.deepEqual(texts(), ["a", "b", "c"]);
    assert.deepEqual(results, [1, 2, 3]);
    db.close();
  });

  it("when a write is asked, then nothing of it is visible before its group commits, and all of it after", async () => {
    const { db, note, texts } = freshDb();
    const writes = new GroupedWrites(db);
    const written = writes.run(() => note("later"));
    assert.deepEqual(texts(), [], "the write waits for the end of the turn");
    await written;
    assert.deepEqual(texts(), ["later"]);
    assert.equal(db.inTransaction, false);
    db.close();
  });

  it("when one write of a group throws halfway, then all of its changes and only its are undone and only its caller gets the error", async () => {
    const { db, note, texts } = freshDb();
    const commits: number[] = [];
    const writes = new GroupedWrites(db, { onCommit: (n) => commits.push(n) });
    // A plain function, not a transaction of its own: the group makes it a savepoint.
    const twoThenFail = () => {
      note("half of a failed write");
      note("a"); // UNIQUE: throws, and the whole write is undone, its first note too
    };
    const outcomes = await Promise.allSettled([writes.run(() => note("a")), writes.run(twoThenFail), writes.run(() => note("b"))]);
    assert.equal(outcomes[0].status, "fulfilled");
    assert.equal(outcomes[1].status, "rejected");
    assert.match(String((outcomes[1] as PromiseRejectedResult).reason.code), /^SQLITE_CONSTRAINT/);
    assert.equal(outcomes[2].status, "fulfilled");
    assert.deepEqual(texts(), ["a", "b"]);
    assert.deepEqual(commits, [3], "one transaction, the failed write's savepoint in it");
    db.close();
  });

  it("when the group's commit fails, then every write in it fails and none of them is kept", async () => {
    const { db, note, texts } = freshDb();
    const commits: number[] = [];
    const writes = new GroupedWrites(db, { onCommit: (n) => commits.push(n) });
    // A deferred foreign key is checked at COMMIT: the orphan passes its own savepoint and fails the group's commit.
    const orphan = db.transaction(() => db.prepare("INSERT INTO children (id, parent_id) VALUES (1, 42)").run());
    const outcomes = await Promise.allSettled([writes.run(() => note("a")), writes.run(orphan), writes.run(() => note("b"))]);
    assert.deepEqual(outcomes.map((o) => o.status), ["rejected", "rejected", "rejected"]);
    for (const outcome of outcomes) assert.match(String((outcome as PromiseRejectedResult).reason.code), /^SQLITE_CONSTRAINT_FOREIGNKEY/);
    assert.deepEqual(texts(), []);
    assert.equal(db.prepare("SELECT COUNT(*) FROM children").pluck().get(), 0);
    assert.deepEqual(commits, []);
    // The next group is a transaction of its own again.
    assert.equal(await writes.run(() => note("c")), 1);
    assert.deepEqual(texts(), ["c"]);
    db.close();
  });

  it("when SQLite ends the group's transaction itself (the file is full), then every write fails as unavailable and none is kept", async () => {
    const { db, note, texts } = freshDb();
    const pages = db.pragma("page_count", { simple: true }) as number;
    db.pragma(`max_page_count = ${pages + 2}`);
    const writes = new GroupedWrites(db);
    const big = (tag: string) => db.transaction(() => note(`${tag}${"x".repeat(64 * 1024)}`));
    const outcomes = await Promise.allSettled([writes.run(() => note("small")), writes.run(big("one")), writes.run(big("two"))]);
    assert.ok(outcomes.some((o) => o.status === "rejected"), "the file had no room for the group");
    for (const outcome of outcomes) {
      if (outcome.status === "rejected") assert.ok(outcome.reason instanceof DependencyUnavailableError, String(outcome.reason));
    }
    // What was answered as written is there; what failed is not.
    const kept = texts();
    outcomes.forEach((outcome, i) => {
      const text = ["small", "one", "two"][i]!;
      assert.equal(kept.some((t) => t.startsWith(text)), outcome.status === "fulfilled", `${text}: ${outcome.status}`);
    });
    db.close();
  });

  it("when writes are asked from different async contexts, then each runs in its caller's (a request's trace), not the first caller's", async () => {
    const { db, note } = freshDb();
    const writes = new GroupedWrites(db);
    const request = new AsyncLocalStorage<string>();
    const seen = await Promise.all(["first", "second", "third"].map((name) =>
      request.run(name, () => writes.run(() => {
        note(name);
        return request.getStore();
      })),
    ));
    assert.deepEqual(seen, ["first", "second", "third"]);
    db.close();
  });

  it("when the writes are closed, then those waiting commit at once and later ones are refused as unavailable", async () => {
    const { db, note, texts } = freshDb();
    const writes = new GroupedWrites(db);
    const waiting = writes.run(() => note("waiting"));
    writes.close();
    assert.deepEqual(texts(), ["waiting"], "committed by close, before the turn ended");
    assert.equal(await waiting, 1);
    await assert.rejects(writes.run(() => note("late")), (error: unknown) => error instanceof DependencyUnavailableError);
    assert.deepEqual(texts(), ["waiting"]);
    db.close();
  });

  it("when the commit's observer throws, then the writes are committed and their callers still get their results", async () => {
    const { db, note, texts } = freshDb();
    const writes = new GroupedWrites(db, { onCommit: () => { throw new Error("telemetry broke"); } });
    assert.deepEqual(await Promise.all([writes.run(() => note("a")), writes.run(() => note("b"))]), [1, 2]);
    assert.deepEqual(texts(), ["a", "b"]);
    db.close();
  });

  it("when more writes wait than one transaction carries, then they commit in several transactions, every one of them", async () => {
    const { db, note, texts } = freshDb();
    const commits: number[] = [];
    const writes = new GroupedWrites(db, { maxPerTransaction: 2, onCommit: (n) => commits.push(n) });
    await Promise.all(["a", "b", "c", "d", "e"].map((text) => writes.run(() => note(text))));
    assert.deepEqual(commits, [2, 2, 1]);
    assert.deepEqual(texts(), ["a", "b", "c", "d", "e"]);
    db.close();
  });

  it("when a write is asked by a caller woken by a commit, then it goes into the next group", async () => {
    const { db, note, texts } = freshDb();
    const commits: number[] = [];
    const writes = new GroupedWrites(db, { onCommit: (n) => commits.push(n) });
    await Promise.all([writes.run(() => note("a")).then(() => writes.run(() => note("after a"))), writes.run(() => note("b"))]);
    assert.deepEqual(commits, [2, 1]);
    assert.deepEqual(texts(), ["a", "b", "after a"]);
    db.close();
  });
});
