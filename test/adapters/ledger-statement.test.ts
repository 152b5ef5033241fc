// backends: embedded, real
import { after, before, describe, it } from "node:test";
import { randomUUID } from "node:crypto";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { CassandraLedger } from "../../src/adapters/cassandra/ledger/cassandra-ledger.js";
import { openSession, type CassandraClient } from "../../src/adapters/cassandra/cassandra-session.js";
import { MemoryLedger } from "../../src/adapters/memory/memory-ledger.js";
import { openSqliteStores, type SqliteStores } from "../../src/adapters/sqlite/sqlite-stores.js";
import type { Ledger, LedgerCursor, LedgerEntry } from "../../src/ports/ledger.js";
import { eventually } from "../support/eventually.js";

/*
 * The statement through the Ledger port on every adapter (SQLite in a
 * temporary directory; Cassandra when TEST_BACKEND=real or
 * CASSANDRA_CONTACT_POINTS is set): every movement is an entry written with
 * it, the sums reconcile, pages and ranges cut it exactly, and on Cassandra
 * entries survive a writer that died before copying them out of the row.
 */

const directories: string[] = [];
const sqliteStores: SqliteStores[] = [];
let cassandraClient: CassandraClient | undefined;
const keyspace = `gen_t_statement_${process.pid}`;
const contactPoints = process.env.CASSANDRA_CONTACT_POINTS || (process.env.TEST_BACKEND === "real" ? "127.0.0.1:9042" : undefined);

async function cassandra(): Promise<CassandraClient> {
  cassandraClient ??= await openSession({
    contactPoints: contactPoints!.split(","), keyspace, localDataCenter: "datacenter1",
    replication: { strategy: "SimpleStrategy", factor: 1 },
  });
  return cassandraClient;
}

const SUBJECTS: { name: string; skip?: string | false; open(): Promise<{ ledger: Ledger; other: Ledger }> }[] = [
  { name: "MemoryLedger", async open() { const ledger = new MemoryLedger(); return { ledger, other: ledger }; } },
  {
    name: "SqliteLedger",
    async open() {
      const dir = mkdtempSync(join(tmpdir(), "ledger-statement-"));
      directories.push(dir);
      const stores = await openSqliteStores({ dataDir: dir, synchronous: "full", defaultPrices: new Map() });
      sqliteStores.push(stores);
      return { ledger: stores.stores.ledger, other: stores.stores.ledger };
    },
  },
  {
    name: "CassandraLedger",
    skip: !contactPoints && "needs TEST_BACKEND=real or CASSANDRA_CONTACT_POINTS (real Cassandra)",
    async open() {
      const client = await cassandra();
      // Two ledgers on one client: two processes writing the same accounts.
      return { ledger: new CassandraLedger(client), other: new CassandraLedger(client) };
    },
  },
];

after(async () => {
  await Promise.all(sqliteStores.splice(0).map((s) => s.close()));
  for (const dir of directories) rmSync(dir, { recursive: true, force: true });
  if (cassandraClient) {
    await cassandraClient.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`);
    await cassandraClient.shutdown();
  }
});

let accounts = 0;
const account = () => `acct-stmt-${process.pid}-${++accounts}`;

async function all(ledger: Ledger, accountId: string, limit = 1000): Promise<LedgerEntry[]> {
  const entries: LedgerEntry[] = [];
  let before: LedgerCursor | undefined;
  for (;;) {
    const page = await ledger.entries({ accountId, limit, before });
    entries.push(...page.entries);
    if (!page.next) return entries;
    before = page.next;
  }
}

function assertSums(entries: readonly LedgerEntry[], balance: bigint, reserved: bigint): void {
  assert.equal(entries.reduce((sum, e) => sum + e.amount, 0n), balance);
  assert.equal(entries.reduce((sum, e) => sum + e.reservedChange, 0n), reserved);
  if (entries.length > 0) {
    assert.equal(entries[0]!.balanceAfter, balance);
    assert.equal(entries[0]!.reservedAfter, reserved);
  }
  for (let i = 1; i < entries.length; i++) assert.ok(entries[i - 1]!.seq > entries[i]!.seq, "newest first, strictly");
}

for (const subject of SUBJECTS) {
  describe(`${subject.name}: the statement`, { skip: subject.skip }, () => {
    let ledger: Ledger;
    let other: Ledger;
    before(async () => {
      ({ ledger, other } = await subject.open());
    });

    it("when money moves, then each movement is one entry with the balance and reserved after it, and the sums are the balance and reserved", async () => {
      const id = account();
      await ledger.createAccount(id, "a", 1_000n);
      await ledger.credit(id, 500n);
      const memo = { jobId: "job-1", model: "aimodel-3.5-flash", keyId: "key_1" };
      assert.equal(await ledger.reserve(id, "job:job-1", 300n, { memo }), "reserved");
      assert.equal(await ledger.reserve(id, "job:job-2", 200n, { memo: { ...memo, jobId: "job-2" } }), "reserved");
      assert.equal(await ledger.reserve(id, "job:job-3", 10_000n, { memo }), "insufficient_funds");
      await ledger.settle(id, "job:job-1", 250n, { promptTokens: 7, candidatesTokens: 11 });
      await ledger.release(id, "job:job-2");
      await ledger.release(id, "job:job-2"); // a repeat moves nothing and writes nothing
      const entries = await all(ledger, id);
      assert.deepEqual(
        entries.map((e) => [e.type, e.amount, e.balanceAfter, e.reservedChange, e.reservedAfter, e.memo?.jobId]).reverse(),
        [
          ["credit", 1_000n, 1_000n, 0n, 0n, undefined],
          ["credit", 500n, 1_500n, 0n, 0n, undefined],
          ["hold", 0n, 1_500n, 300n, 300n, "job-1"],
          ["hold", 0n, 1_500n, 200n, 500n, "job-2"],
          ["charge", -250n, 1_250n, -300n, 200n, "job-1"],
          ["release", 0n, 1_250n, -200n, 0n, "job-2"],
        ],
      );
      const charge = entries.find((e) => e.type === "charge")!;
      assert.deepEqual(charge.memo, memo);
      assert.deepEqual(charge.tokens, { promptTokens: 7, candidatesTokens: 11 });
      assertSums(entries, 1_250n, 0n);
    });

    it("when a hold is released with a reason, then its release entry reads it back (to another writer too), and entries without one read no reason", async () => {
      const id = account();
      await ledger.createAccount(id, "a", 1_000n);
      // Reservation ids are unique across accounts (as the service's are).
      const memo = { jobId: "job-r", model: "aimodel-2.5-flash-image" };
      for (const n of [1, 2, 3]) assert.equal(await ledger.reserve(id, `job:${id}-why${n}`, 100n, { memo: { ...memo, jobId: `job-r${n}` } }), "reserved");
      await ledger.release(id, `job:${id}-why1`, "client_gone");
      await ledger.release(id, `job:${id}-why1`, "job_failed"); // a repeat moves nothing and writes nothing, not even its reason
      await ledger.release(id, `job:${id}-why2`);
      await ledger.settle(id, `job:${id}-why3`, 40n);
      const entries = await all(other, id);
      assert.deepEqual(
        entries.map((e) => [e.type, e.memo?.jobId, e.reason]).reverse(),
        [
          ["credit", undefined, undefined],
          ["hold", "job-r1", undefined], ["hold", "job-r2", undefined], ["hold", "job-r3", undefined],
          ["release", "job-r1", "client_gone"],
          ["release", "job-r2", undefined],
          ["charge", "job-r3", undefined],
        ],
      );
      assertSums(entries, 960n, 0n);
    });

    it("when an account opens with nothing, then it has no entry until money moves", async () => {
      const id = account();
      await ledger.createAccount(id, "a", 0n);
      assert.deepEqual((await ledger.entries({ accountId: id, limit: 10 })).entries, []);
      assert.deepEqual((await ledger.entries({ accountId: "acct-nobody", limit: 10 })).entries, []);
    });

    it("when the statement is read in pages and ranges, then they cut it exactly", async () => {
      const id = account();
      await ledger.createAccount(id, "a", 10n);
      for (let i = 0; i < 9; i++) await other.credit(id, BigInt(i + 1));
      const whole = await all(ledger, id);
      assert.equal(whole.length, 10);
      assert.deepEqual(await all(ledger, id, 3), whole);
      const pivot = whole[4]!.at;
      const newer = (await ledger.entries({ accountId: id, limit: 100, from: pivot })).entries;
      const older = (await ledger.entries({ accountId: id, limit: 100, to: pivot })).entries;
      assert.deepEqual([...newer, ...older], whole);
    });

    it("when hundreds of movements of one account arrive at once (group-committed in large batches), then every one is an entry", async () => {
      const id = account();
      await ledger.createAccount(id, "a", 1_000_000n);
      // Realistic ids (a UUID job, a key_ id): a whole batch's entries in one write would pass Cassandra's 50 KiB batch limit.
      const memo = (i: number) => ({ jobId: randomUUID(), model: `aimodel-2.5-flash-image-${i}`, keyId: `key_${randomUUID().replaceAll("-", "")}` });
      await Promise.all(Array.from({ length: 300 }, (_, i) => ledger.reserve(id, `job:big${i}`, 1n, { memo: memo(i) })));
      const entries = await all(other, id);
      assert.equal(entries.length, 301);
      assertSums(entries, 1_000_000n, 300n);
      await ledger.credit(id, 1n); // the account still moves: every copy went through
      assert.equal((await all(other, id)).length, 302);
    });

    it("when two writers move one account's money at once, then every movement is an entry and the sums hold", async () => {
      const id = account();
      await ledger.createAccount(id, "a", 100_000n);
      await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const writer = i % 2 ? ledger : other;
          assert.equal(await writer.reserve(id, `job:r${i}`, 100n, { memo: { jobId: `r${i}`, model: "m" } }), "reserved");
          if (i % 3 === 0) await writer.release(id, `job:r${i}`);
          else await writer.settle(id, `job:r${i}`, 60n);
        }),
      );
      const entries = await all(other, id);
      assert.equal(entries.length, 1 + 40 + 40);
      const balance = await ledger.balance(id);
      assertSums(entries, balance!.balance, balance!.reserved);
      assert.equal(balance!.balance, 100_000n - 60n * 26n);
    });
  });
}

describe("CassandraLedger: entries outlive the writer that made them", { skip: !contactPoints && "needs real Cassandra" }, () => {
  it("when a writer's copy of its entries is lost, then the next writer, or a reader, copies them from the row before anything else", async () => {
    const client = await cassandra();
    const first = new CassandraLedger(client);
    const id = account();
    await first.createAccount(id, "a", 1_000n);
    await first.credit(id, 1n);
    // The copy of the last write (and of the opening) never happened: as if the process died right after its write.
    await first.entries({ accountId: id, limit: 1 }); // lets the background copies finish first
    await client.execute("DELETE FROM ledger_rounds WHERE account_id = ? AND day = ?", [id, Math.floor(Date.now() / 86_400_000)]);
    const next = new CassandraLedger(client); // another process, which has copied nothing
    await next.credit(id, 2n);
    const reader = new CassandraLedger(client);
    const entries = await all(reader, id);
    // The opening credit's copy is gone for good (its journal was replaced twice); the lost write's entry was copied by `next`.
    assert.deepEqual(entries.map((e) => e.amount), [2n, 1n]);
    // A reader alone also repairs: delete again, read again.
    await client.execute("DELETE FROM ledger_rounds WHERE account_id = ? AND day = ?", [id, Math.floor(Date.now() / 86_400_000)]);
    assert.deepEqual((await all(new CassandraLedger(client), id)).map((e) => e.amount), [2n]);
  });
});

describe("CassandraLedger: a writer killed mid-round", { skip: !contactPoints && "needs real Cassandra" }, () => {
  it("when a process moving an account's money without pause is killed with SIGKILL, then its statement still reconciles to the cent, and the account moves on", async () => {
    const client = await cassandra();
    const id = account();
    await new CassandraLedger(client).createAccount(id, "a", 1_000_000n);
    const child = spawn(process.execPath, ["--import", "tsx", "test/support/ledger-writer-child.ts"], {
      env: { PATH: process.env.PATH ?? "", CASSANDRA_CONTACT_POINTS: contactPoints!, CASSANDRA_KEYSPACE: keyspace, ACCOUNT_ID: id, CALLERS: "32" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const exited = once(child, "exit");
    let out = "";
    child.stdout!.on("data", (chunk) => (out += chunk));
    const ledger = new CassandraLedger(client);
    // Killed once it has moved money for a while: rounds and their copies are in flight when it dies.
    await eventually(
      async () => {
        assert.equal(child.exitCode, null, "the writer keeps running until it is killed");
        return out.includes("moving") && (await ledger.balance(id))!.balance <= 1_000_000n - 200n;
      },
      Boolean,
      { timeoutMs: 60_000, intervalMs: 50, what: "the writer to move money for a while" },
    );
    child.kill("SIGKILL");
    await exited;
    const balance = (await ledger.balance(id))!;
    const entries = await all(new CassandraLedger(client), id, 500);
    assertSums(entries, balance.balance, balance.reserved);
    assert.ok(entries.length > 100, `${entries.length} entries`);
    // Its holds left open are ended by their owner's next step (here: by hand); the account moves on from where it died.
    const open = new Set<string>();
    for (const entry of [...entries].reverse()) {
      if (entry.type === "hold") open.add(entry.memo!.jobId!);
      else if (entry.memo?.jobId) open.delete(entry.memo.jobId);
    }
    for (const hold of open) await ledger.release(id, hold); // the memo's job id is the reservation id here
    assert.deepEqual(await ledger.balance(id), { balance: balance.balance, reserved: 0n });
    const after = await all(new CassandraLedger(client), id);
    assertSums(after, balance.balance, 0n);
  });
});

describe("CassandraLedger: a statement begun before version 12", { skip: !contactPoints && "needs real Cassandra" }, () => {
  it("when an account's older entries were copied one by one (ledger_entries) and its newer a round at a time, then its statement gives them all in order, in pages", async () => {
    const client = await cassandra();
    const ledger = new CassandraLedger(client);
    const id = account();
    await ledger.createAccount(id, "a", 1_000n);
    for (const amount of [1n, 2n, 3n]) await ledger.credit(id, amount);
    const before = await all(ledger, id);
    // As version 11 left them: each entry a row of ledger_entries, no round copied whole.
    const day = Math.floor(Date.now() / 86_400_000);
    await client.execute("DELETE FROM ledger_rounds WHERE account_id = ? AND day = ?", [id, day]);
    for (const e of before) {
      await client.execute(
        "INSERT INTO ledger_entries (account_id, day, seq, type, amount, balance_after, reserved_change, reserved_after, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [id, Math.floor(e.at.getTime() / 86_400_000), e.seq, e.type, e.amount, e.balanceAfter, e.reservedChange, e.reservedAfter, e.at],
      );
    }
    assert.equal(await ledger.reserve(id, "h1", 5n, { memo: { jobId: "j1", model: "m" } }), "reserved");
    await ledger.settle(id, "h1", 4n, { promptTokens: 3, candidatesTokens: 2 });
    await ledger.credit(id, 4n);
    for (const limit of [1, 2, 3, 1000]) {
      const entries = await all(new CassandraLedger(client), id, limit);
      assert.deepEqual(entries.map((e) => [e.type, e.amount]), [["credit", 4n], ["charge", -4n], ["hold", 0n], ["credit", 3n], ["credit", 2n], ["credit", 1n], ["credit", 1_000n]], `pages of ${limit}`);
      assertSums(entries, 1_006n, 0n);
      assert.deepEqual(entries[1]!.memo, { jobId: "j1", model: "m", keyId: undefined });
      assert.deepEqual(entries[1]!.tokens, { promptTokens: 3, candidatesTokens: 2 });
    }
  });
});
