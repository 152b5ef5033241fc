// backends: embedded
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { DataDirInUseError, openSqliteDatabase } from "../../src/adapters/sqlite/sqlite-database.js";
import { openSqliteStores } from "../../src/adapters/sqlite/sqlite-stores.js";
import { eventually } from "../support/eventually.js";
import { REPO_ROOT } from "../support/repo.js";

const REPO = REPO_ROOT;
const directories: string[] = [];

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "sqlite-db-"));
  directories.push(dir);
  return dir;
}

after(() => {
  for (const dir of directories) rmSync(dir, { recursive: true, force: true });
});

/** `<dir>/service.db` as a build that shipped only the migrations before `version` left it (e.g. "0004": schema 3). */
function databaseBefore(dir: string, version: string) {
  const old = join(dir, "migrations");
  mkdirSync(old);
  const shipped = join(REPO, "src/adapters/sqlite/migrations");
  for (const file of readdirSync(shipped).filter((f) => f < version)) writeFileSync(join(old, file), readFileSync(join(shipped, file)));
  return openSqliteDatabase({ path: join(dir, "service.db"), synchronous: "normal", migrationsDir: old });
}

/**
 * A child process of node that opens the stores in `dataDir`, reports "ready <pid>" and stays until killed.
 * It drops every reference to the stores and collects garbage first: the lock must hold all the same.
 */
function startHolder(dataDir: string) {
  const script = join(dataDir, `holder-${Date.now()}.mts`);
  const storesModule = pathToFileURL(join(REPO, "src/adapters/sqlite/sqlite-stores.ts")).href;
  writeFileSync(
    script,
    `import { openSqliteStores } from ${JSON.stringify(storesModule)};
let stores: unknown = await openSqliteStores({ dataDir: process.argv[2], synchronous: "full", defaultPrices: new Map() });
await (stores as Awaited<ReturnType<typeof openSqliteStores>>).stores.ledger.createAccount("from-child", "child", 42n);
stores = undefined;
for (let i = 0; i < 3; i++) {
  (globalThis as unknown as { gc(): void }).gc();
  await new Promise((r) => setTimeout(r, 20));
}
process.stdout.write("ready " + process.pid + "\\n");
setInterval(() => {}, 60_000);
`,
  );
  const child = spawn(process.execPath, ["--expose-gc", "--import", "tsx", script, dataDir], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((r) => child.on("exit", () => r()));
  return {
    child,
    exited,
    output: () => output,
    async ready() {
      await eventually(() => output.includes("ready") || child.exitCode !== null, Boolean, { what: "the child to open the store" });
      assert.ok(output.includes("ready"), `child output: ${output}`);
    },
  };
}

describe("openSqliteDatabase", () => {
  it("when a database is opened, then it runs in WAL with the asked synchronous and foreign keys, and migrations apply once", () => {
    const dir = freshDir();
    const path = join(dir, "service.db");
    for (const [synchronous, expected] of [["full", 2], ["normal", 1], ["extra", 3]] as const) {
      const handle = openSqliteDatabase({ path, synchronous });
      try {
        assert.equal(handle.db.pragma("journal_mode", { simple: true }), "wal");
        assert.equal(handle.db.pragma("synchronous", { simple: true }), expected);
        assert.equal(handle.db.pragma("foreign_keys", { simple: true }), 1);
        assert.equal(handle.db.pragma("locking_mode", { simple: true }), "normal");
        const versions = handle.db.prepare("SELECT version, name FROM schema_migrations").all();
        const shipped = readdirSync(join(REPO_ROOT, "src/adapters/sqlite/migrations")).filter((name) => name.endsWith(".sql")).sort();
        assert.ok(shipped.length >= 2, shipped.join(","));
        assert.deepEqual(versions, shipped.map((name, index) => ({ version: index + 1, name })));
      } finally {
        handle.close();
      }
    }
    assert.throws(() => openSqliteDatabase({ path, synchronous: "off" as never }), /synchronous/);
  });

  it("when migrations are added, then only the new ones run, in order, and a failing one leaves nothing behind", () => {
    const dir = freshDir();
    const migrations = join(dir, "migrations");
    mkdirSync(migrations);
    const path = join(dir, "service.db");
    writeFileSync(join(migrations, "0001_first.sql"), "CREATE TABLE a (x INTEGER);");
    openSqliteDatabase({ path, synchronous: "normal", migrationsDir: migrations }).close();
    writeFileSync(join(migrations, "0002_second.sql"), "INSERT INTO a VALUES (1); CREATE TABLE b (y TEXT);");
    writeFileSync(join(migrations, "0003_broken.sql"), "CREATE TABLE c (z TEXT); INSERT INTO missing VALUES (1);");
    assert.throws(() => openSqliteDatabase({ path, synchronous: "normal", migrationsDir: migrations }), /missing/);
    rmSync(join(migrations, "0003_broken.sql"));
    const handle = openSqliteDatabase({ path, synchronous: "normal", migrationsDir: migrations });
    try {
      assert.deepEqual(handle.db.prepare("SELECT version FROM schema_migrations ORDER BY version").pluck().all(), [1, 2]);
      assert.equal(handle.db.prepare("SELECT count(*) FROM a").pluck().get(), 1); // 0002 ran once
      const tables = handle.db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all();
      assert.ok(!tables.includes("c"), "the failed migration was rolled back");
      handle.db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9, 'future', '')").run();
    } finally {
      handle.close();
    }
    assert.throws(() => openSqliteDatabase({ path, synchronous: "normal", migrationsDir: migrations }), /newer than this build/);
  });

  it("when a version-3 database is upgraded, then its jobs keep their rows and may be canceled, and its ledger becomes a statement that still reconciles", async () => {
    const dir = freshDir();
    const legacy = databaseBefore(dir, "0004");
    legacy.db.exec(`
      INSERT INTO accounts (account_id, name, balance, reserved, created_at) VALUES ('a', 'a', '750', '200', 1);
      INSERT INTO holds (reservation_id, account_id, amount, state, charged, created_at, ended_at) VALUES ('job:1', 'a', '300', 'settled', '250', 2, 3);
      INSERT INTO holds (reservation_id, account_id, amount, state, created_at) VALUES ('job:2', 'a', '200', 'held', 4);
      INSERT INTO ledger_entries (account_id, kind, amount, balance_after, reservation_id, at) VALUES ('a', 'opening', '1000', '1000', NULL, 1);
      INSERT INTO ledger_entries (account_id, kind, amount, balance_after, reservation_id, at) VALUES ('a', 'charge', '250', '750', 'job:1', 3);
      INSERT INTO jobs (job_id, account_id, status, body, created_at, model) VALUES ('j1', 'a', 'queued', '{}', 5, 'm');
    `);
    legacy.close();
    const stores = await openSqliteStores({ dataDir: dir, synchronous: "normal", defaultPrices: new Map() });
    try {
      const db = stores.database.db;
      assert.deepEqual(db.prepare("SELECT job_id, status, created_at, model FROM jobs").all(), [{ job_id: "j1", status: "queued", created_at: 5, model: "m" }]);
      db.prepare("UPDATE jobs SET status = 'canceled' WHERE job_id = 'j1'").run(); // the new CHECK admits it
      const page = await stores.stores.ledger.entries({ accountId: "a", limit: 10 });
      assert.deepEqual(page.entries.map((e) => [e.type, e.amount, e.balanceAfter, e.reservedChange, e.reservedAfter]).reverse(), [
        ["credit", 1_000n, 1_000n, 0n, 0n],
        ["charge", -250n, 750n, 0n, 0n],
        ["hold", 0n, 750n, 200n, 200n],
      ]);
      // New movements continue the statement: the release of the carried-over hold brings reserved to zero.
      await stores.stores.ledger.release("a", "job:2");
      const after = (await stores.stores.ledger.entries({ accountId: "a", limit: 10 })).entries;
      assert.deepEqual([after[0]!.type, after[0]!.reservedChange, after[0]!.reservedAfter, after[0]!.balanceAfter], ["release", -200n, 0n, 750n]);
      assert.equal(after.reduce((sum, e) => sum + e.amount, 0n), 750n);
    } finally {
      await stores.close();
    }
  });

  it("when a version-10 database is upgraded, then its statement, open holds and unfinished intents read the same, entries keep numbering on, and open holds are found by index", async () => {
    const dir = freshDir();
    const legacy = databaseBefore(dir, "0011");
    legacy.db.exec(`
      INSERT INTO accounts (account_id, name, balance, reserved, created_at) VALUES ('a', 'a', '700', '200', 1);
      INSERT INTO holds (reservation_id, account_id, amount, state, charged, created_at, ended_at, key_id) VALUES ('job:1', 'a', '300', 'settled', '300', 2, 3, 'k');
      INSERT INTO holds (reservation_id, account_id, amount, state, created_at, key_id) VALUES ('job:2', 'a', '200', 'held', 4, 'k');
      INSERT INTO ledger_entries (entry_id, account_id, kind, amount, balance_after, reserved_change, reserved_after, at) VALUES (1, 'a', 'credit', '1000', '1000', '0', '0', 1);
      INSERT INTO ledger_entries (entry_id, account_id, kind, amount, balance_after, reserved_change, reserved_after, reservation_id, at) VALUES (2, 'a', 'hold', '0', '1000', '300', '300', 'job:1', 2);
      INSERT INTO ledger_entries (entry_id, account_id, kind, amount, balance_after, reserved_change, reserved_after, reservation_id, at) VALUES (7, 'a', 'charge', '-300', '700', '-300', '0', 'job:1', 3);
      INSERT INTO ledger_entries (entry_id, account_id, kind, amount, balance_after, reserved_change, reserved_after, reservation_id, at) VALUES (10, 'a', 'hold', '0', '700', '200', '200', 'job:2', 4);
      INSERT INTO unfinished_jobs (job_id, account_id, since) VALUES ('2', 'a', 4);
    `);
    legacy.close();
    const stores = await openSqliteStores({ dataDir: dir, synchronous: "normal", defaultPrices: new Map() });
    try {
      const { ledger, jobs } = stores.stores;
      const db = stores.database.db;
      const page = await ledger.entries({ accountId: "a", limit: 10 });
      assert.deepEqual(page.entries.map((e) => [e.seq, e.type, e.amount, e.reservedAfter]), [
        [10n, "hold", 0n, 200n], [7n, "charge", -300n, 0n], [2n, "hold", 0n, 300n], [1n, "credit", 1_000n, 0n],
      ]);
      assert.deepEqual((await jobs.listUnfinished(10)).entries.map((entry) => [entry.jobId, entry.accountId, entry.since.getTime()]), [["2", "a", 4]]);
      assert.deepEqual(await ledger.keyAccount("a", "k"), { spending: (await ledger.keyAccount("a", "nobody")).spending, held: 200n, openJobs: 0 });
      // The next movement numbers on from the largest entry, and no longer writes sqlite_sequence.
      await ledger.release("a", "job:2");
      const [release] = (await ledger.entries({ accountId: "a", limit: 1 })).entries;
      assert.deepEqual([release!.seq, release!.type, release!.reservedAfter], [11n, "release", 0n]);
      assert.equal(db.prepare("SELECT COUNT(*) FROM sqlite_sequence WHERE name = 'ledger_entries'").pluck().get(), 0);
      assert.deepEqual(await ledger.keyAccount("a", "k"), { spending: (await ledger.keyAccount("a", "nobody")).spending, held: 0n, openJobs: 0 });
      const plan = (sql: string) => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((row) => row.detail).join("; ");
      assert.match(plan("SELECT COUNT(*) FROM holds WHERE account_id = 'a' AND state = 'held'"), /USING (COVERING )?INDEX holds_by_account/);
      assert.match(plan("SELECT amount FROM holds WHERE key_id = 'k' AND account_id = 'a' AND state = 'held'"), /USING INDEX holds_by_key/);
    } finally {
      await stores.close();
    }
  });

  it("when the same data directory is opened twice in one process, then the second open fails until the first closes", () => {
    const path = join(freshDir(), "service.db");
    const first = openSqliteDatabase({ path, synchronous: "normal" });
    try {
      assert.throws(
        () => openSqliteDatabase({ path, synchronous: "normal" }),
        (error: unknown) => error instanceof DataDirInUseError && error.message.includes(`is already open in this process (pid ${process.pid})`),
      );
    } finally {
      first.close();
    }
    openSqliteDatabase({ path, synchronous: "normal" }).close();
  });
});

describe("the process lock", () => {
  it("when another process holds the data directory, then opening fails naming its pid, and once it is SIGKILLed the directory opens", async () => {
    const dir = freshDir();
    const holder = startHolder(dir);
    try {
      await holder.ready();
      await assert.rejects(
        openSqliteStores({ dataDir: dir, synchronous: "full", defaultPrices: new Map() }),
        (error: unknown) =>
          error instanceof DataDirInUseError &&
          error.message.includes(`DATA_DIR ${dir} is in use by another process (pid ${holder.child.pid})`),
      );
    } finally {
      holder.child.kill("SIGKILL");
      await holder.exited;
    }
    const stores = await openSqliteStores({ dataDir: dir, synchronous: "full", defaultPrices: new Map() });
    try {
      assert.deepEqual(await stores.stores.ledger.balance("from-child"), { balance: 42n, reserved: 0n });
    } finally {
      await stores.close();
    }
  });

  it("when a new or an existing database is opened, then other connections (the checkpointer's, a backup's) still read and checkpoint it: only opening is exclusive", () => {
    const path = join(freshDir(), "service.db");
    for (const round of ["new", "existing"]) {
      const handle = openSqliteDatabase({ path, synchronous: "normal" });
      try {
        handle.db.exec("CREATE TABLE IF NOT EXISTS t (x)");
        handle.db.prepare("INSERT INTO t VALUES (1)").run();
        const other = new Database(path, { timeout: 0 });
        try {
          assert.ok((other.prepare("SELECT count(*) FROM t").pluck().get() as number) >= 1, round);
          assert.equal((other.prepare("PRAGMA wal_checkpoint(PASSIVE)").get() as { busy: number }).busy, 0, round);
        } finally {
          other.close();
        }
      } finally {
        handle.close();
      }
    }
  });

  it("when this process holds the data directory, then a second process cannot open it", async () => {
    const dir = freshDir();
    const stores = await openSqliteStores({ dataDir: dir, synchronous: "full", defaultPrices: new Map() });
    try {
      const second = startHolder(dir);
      await second.exited;
      assert.notEqual(second.child.exitCode, 0);
      assert.match(second.output(), new RegExp(`is in use by another process \\(pid ${process.pid}\\)`));
    } finally {
      await stores.close();
    }
  });
});

describe("online backup", () => {
  it("when the store is open and busy, then a backup (.backup and VACUUM INTO) is consistent and has the data", async (t) => {
    const dir = freshDir();
    const stores = await openSqliteStores({ dataDir: dir, synchronous: "normal", defaultPrices: new Map() });
    try {
      await stores.stores.ledger.createAccount("acct", "acct", 1_000_000_000_000_000_000_000n);
      for (let i = 0; i < 100; i++) await stores.stores.ledger.reserve("acct", `r-${i}`, 7n);
      // Everything is still in the WAL (not checkpointed): the copies must include it.
      assert.ok(readdirSync(dir).includes("service.db-wal"));

      const vacuumCopy = join(dir, "vacuum-copy.db");
      const vacuum = spawnSync(
        process.execPath,
        ["-e", `const D = require("better-sqlite3"); const db = new D(process.argv[1]); db.exec("VACUUM INTO '" + process.argv[2] + "'"); db.close();`, stores.path, vacuumCopy],
        { cwd: REPO, encoding: "utf8" },
      );
      assert.equal(vacuum.status, 0, vacuum.stderr);
      const copies = [vacuumCopy];

      const cli = spawnSync("sqlite3", ["-version"], { encoding: "utf8" });
      if (cli.status === 0) {
        const cliCopy = join(dir, "cli-copy.db");
        const backup = spawnSync("sqlite3", [stores.path, `.backup '${cliCopy}'`], { encoding: "utf8" });
        assert.equal(backup.status, 0, backup.stderr);
        copies.push(cliCopy);
      } else {
        t.diagnostic("no sqlite3 shell on PATH: .backup not exercised");
      }

      // The store keeps working while and after the copies are taken.
      await stores.stores.ledger.reserve("acct", "after-backup", 1n);
      assert.deepEqual(await stores.stores.ledger.balance("acct"), { balance: 1_000_000_000_000_000_000_000n, reserved: 701n });

      for (const copy of copies) {
        const db = new Database(copy, { readonly: true });
        try {
          assert.equal(db.pragma("integrity_check", { simple: true }), "ok");
          assert.deepEqual(db.prepare("SELECT balance, reserved FROM accounts WHERE account_id = 'acct'").get(), {
            balance: "1000000000000000000000", reserved: "700",
          });
          assert.equal(db.prepare("SELECT count(*) FROM holds").pluck().get(), 100);
        } finally {
          db.close();
        }
      }
    } finally {
      await stores.close();
    }
  });
});
