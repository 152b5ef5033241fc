// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import Database from "better-sqlite3";
import cassandra from "cassandra-driver";
import { CassandraLedger } from "../../src/adapters/cassandra/ledger/cassandra-ledger.js";
import { openSession, type CassandraClient } from "../../src/adapters/cassandra/cassandra-session.js";
import { MemoryLedger } from "../../src/adapters/memory/memory-ledger.js";
import { SqliteLedger } from "../../src/adapters/sqlite/sqlite-ledger.js";
import { openSqliteStores, type SqliteStores } from "../../src/adapters/sqlite/sqlite-stores.js";
import type { KeyLimits } from "../../src/domain/accounts/key-limits.js";
import type { Ledger, ReserveOptions, ReserveOutcome } from "../../src/ports/ledger.js";

/*
 * The ledger's bounds on every adapter, through the Ledger port on the real
 * store (SQLite in a temporary directory; Cassandra when TEST_BACKEND=real or
 * CASSANDRA_CONTACT_POINTS is set):
 *  - ReserveOptions.maxOpenHolds: the open-hold limit is checked in the same
 *    atomic step as the funds, also against concurrent writers;
 *  - a settlement never takes a balance below zero: it charges at most hold +
 *    available and records the rest as a shortfall, once.
 */

/** Job holds count, synchronous text calls' holds do not (as core/money/holds.ts asks). */
const JOBS_AT_MOST = (limit: number): ReserveOptions => ({
  maxOpenHolds: { limit, countedPrefix: "job:", exceptPrefix: "job:text-call-" },
});

// A worker thread of this file: one more SQLite connection (as another process would have) racing for holds.
if (!isMainThread) {
  const { path, accountId, ids, limit, start } = workerData as {
    path: string; accountId: string; ids: string[]; limit: number; start: Int32Array;
  };
  // A plain connection to the same file (the data directory's process lock belongs to the main thread's stores).
  const db = new Database(path);
  db.pragma("busy_timeout = 10000");
  const ledger = new SqliteLedger(db);
  parentPort!.postMessage({ ready: true });
  Atomics.wait(start, 0, 0); // every worker starts at once
  const outcomes: ReserveOutcome[] = [];
  for (const id of ids) outcomes.push(await ledger.reserve(accountId, id, 1n, JOBS_AT_MOST(limit)));
  db.close();
  parentPort!.postMessage({ outcomes });
}

interface Subject {
  readonly name: string;
  /**
   * Whether a settlement in full is remembered beyond its hold (a repeat answers it); Cassandra
   * keeps only the capped ones (in the account row's shortfalls), and a repeat of another answers undefined.
   */
  readonly remembersFullSettlements: boolean;
  /** A fresh ledger on the store (and a second writer on the same store, for races between processes). */
  open(): Promise<{ ledger: Ledger; other: Ledger }>;
  readonly skip?: string | false;
}

const directories: string[] = [];
const sqliteStores: SqliteStores[] = [];
let cassandraClient: CassandraClient | undefined;
const keyspace = `gen_t_ledger_${process.pid}`;
const contactPoints = process.env.CASSANDRA_CONTACT_POINTS || (process.env.TEST_BACKEND === "real" ? "127.0.0.1:9042" : undefined);

async function openSqlite() {
  const dir = mkdtempSync(join(tmpdir(), "ledger-bounds-"));
  directories.push(dir);
  const stores = await openSqliteStores({ dataDir: dir, synchronous: "full", defaultPrices: new Map() });
  sqliteStores.push(stores);
  return stores;
}

const SUBJECTS: Subject[] = [
  {
    name: "MemoryLedger",
    remembersFullSettlements: true,
    async open() {
      const ledger = new MemoryLedger();
      return { ledger, other: ledger };
    },
  },
  {
    name: "SqliteLedger",
    remembersFullSettlements: true,
    async open() {
      const stores = await openSqlite();
      return { ledger: stores.stores.ledger, other: new SqliteLedger(stores.database.db) };
    },
  },
  {
    name: "CassandraLedger",
    remembersFullSettlements: false,
    skip: !contactPoints && "needs TEST_BACKEND=real or CASSANDRA_CONTACT_POINTS (real Cassandra)",
    async open() {
      cassandraClient ??= await openSession({
        contactPoints: contactPoints!.split(","), keyspace, localDataCenter: "datacenter1",
        replication: { strategy: "SimpleStrategy", factor: 1 },
      });
      // Two ledgers on one client: two processes' group-commit queues racing through the version check.
      return { ledger: new CassandraLedger(cassandraClient), other: new CassandraLedger(cassandraClient) };
    },
  },
];

if (isMainThread) {
  after(async () => {
    await Promise.all(sqliteStores.splice(0).map((s) => s.close()));
    for (const dir of directories) rmSync(dir, { recursive: true, force: true });
    if (cassandraClient) {
      await cassandraClient.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`);
      await cassandraClient.shutdown();
    }
  });

  let accounts = 0;
  const account = () => `acct-${++accounts}`;

  for (const subject of SUBJECTS) {
    describe(`${subject.name}: open-hold limit and bounded settlements`, { skip: subject.skip }, () => {
      let ledger: Ledger;
      let other: Ledger;
      before(async () => {
        ({ ledger, other } = await subject.open());
      });

      it("when an account holds as many counted holds as the limit, then the next is refused with too_many_open_holds and nothing is reserved", async () => {
        const id = account();
        await ledger.createAccount(id, "a", 1_000n);
        assert.equal(await ledger.reserve(id, "job:a", 100n, JOBS_AT_MOST(2)), "reserved");
        assert.equal(await ledger.reserve(id, "job:b", 100n, JOBS_AT_MOST(2)), "reserved");
        // Holds outside the counted prefix, or under the excepted one, do not count.
        assert.equal(await ledger.reserve(id, "job:text-call-1", 100n), "reserved");
        assert.equal(await ledger.reserve(id, "other:1", 100n), "reserved");
        assert.equal(await ledger.reserve(id, "job:text-call-2", 100n, JOBS_AT_MOST(2)), "too_many_open_holds",
          "a hold under the excepted prefix is refused too when the limit is reached (the option asks for it)");
        assert.equal(await ledger.reserve(id, "job:c", 100n, JOBS_AT_MOST(2)), "too_many_open_holds");
        assert.deepEqual(await ledger.balance(id), { balance: 1_000n, reserved: 400n }, "a refusal reserves nothing");
        // Idempotency stays: the same id again is "reserved", even at the limit, and holds nothing more.
        assert.equal(await ledger.reserve(id, "job:a", 100n, JOBS_AT_MOST(2)), "reserved");
        assert.deepEqual(await ledger.balance(id), { balance: 1_000n, reserved: 400n });
        // An ended hold frees its place.
        await ledger.release(id, "job:a");
        assert.equal(await ledger.reserve(id, "job:c", 100n, JOBS_AT_MOST(2)), "reserved");
        assert.deepEqual(await ledger.balance(id), { balance: 1_000n, reserved: 400n });
      });

      it("when holds taken before the limit was first asked for end afterwards, by settling or releasing, then the open count follows every one of them", async () => {
        const id = account();
        await ledger.createAccount(id, "a", 1_000n);
        for (const h of ["job:p", "job:q", "job:text-call-p"]) assert.equal(await ledger.reserve(id, h, 10n), "reserved");
        assert.equal(await ledger.reserve(id, "job:r", 10n, JOBS_AT_MOST(3)), "reserved", "2 counted holds open, then the third");
        assert.equal(await ledger.reserve(id, "job:s", 10n, JOBS_AT_MOST(3)), "too_many_open_holds");
        await ledger.settle(id, "job:p", 5n);
        await ledger.release(id, "job:text-call-p");
        await ledger.settle(id, "job:p", 5n); // a repeat moves nothing
        assert.equal(await ledger.reserve(id, "job:s", 10n, JOBS_AT_MOST(3)), "reserved", "the settled hold freed its place");
        assert.equal(await other.reserve(id, "job:t", 10n, JOBS_AT_MOST(3)), "too_many_open_holds", "the second writer counts the same");
        await other.release(id, "job:q");
        await ledger.release(id, "job:r");
        assert.equal(await ledger.reserve(id, "job:t", 10n, JOBS_AT_MOST(3)), "reserved");
        assert.equal(await ledger.reserve(id, "job:u", 10n, JOBS_AT_MOST(3)), "reserved");
        assert.equal(await ledger.reserve(id, "job:v", 10n, JOBS_AT_MOST(3)), "too_many_open_holds");
        assert.equal(await ledger.reserve(id, "job:v", 10n, JOBS_AT_MOST(4)), "reserved", "another limit counts the same holds");
      });

      it("when a key's job and spend limits are checked while its holds come and go, then they see exactly the key's open holds", async () => {
        const id = account();
        await ledger.createAccount(id, "a", 1_000n);
        const key = (limits: KeyLimits, isJob = true) => ({ key: { keyId: `${id}-key`, limits, isJob }, memo: { keyId: `${id}-key`, jobId: isJob ? "j" : undefined, model: "m" } });
        assert.equal(await ledger.reserve(id, "job:k1", 30n, { ...key({}), memo: { keyId: `${id}-key`, jobId: "k1", model: "m" } }), "reserved");
        assert.equal(await ledger.reserve(id, "job:text-call-k", 20n, key({}, false)), "reserved");
        const jobs = (n: number) => ({ maxConcurrentJobs: n });
        assert.deepEqual(await ledger.reserve(id, "job:k2", 10n, { ...key(jobs(1)), memo: { keyId: `${id}-key`, jobId: "k2", model: "m" } }), { key: { kind: "concurrency" } });
        assert.deepEqual(await ledger.reserve(id, "job:k2", 10n, key({ spendLimit: 59n })), { key: { kind: "spend", limit: "spend_limit" } }, "30 + 20 held + 10 asked > 59");
        await ledger.release(id, "job:k1");
        assert.equal(await ledger.reserve(id, "job:k2", 10n, { ...key(jobs(1)), memo: { keyId: `${id}-key`, jobId: "k2", model: "m" } }), "reserved");
        assert.deepEqual(await ledger.reserve(id, "job:k3", 10n, { ...key(jobs(1)), memo: { keyId: `${id}-key`, jobId: "k3", model: "m" } }), { key: { kind: "concurrency" } });
        await ledger.settle(id, "job:text-call-k", 20n);
        assert.equal(await ledger.reserve(id, "job:k3", 20n, key({ spendLimit: 60n }, false)), "reserved", "charged 20 + held 10 + asked 20 = 50 ≤ 60");
        assert.deepEqual(await ledger.reserve(id, "job:k4", 11n, key({ spendLimit: 60n }, false)), { key: { kind: "spend", limit: "spend_limit" } }, "20 + 30 held + 11 > 60");
      });

      it("when the limit allows but the funds do not, then the answer is insufficient_funds; without the option, no limit applies", async () => {
        const id = account();
        await ledger.createAccount(id, "a", 10n);
        assert.equal(await ledger.reserve(id, "job:x", 11n, JOBS_AT_MOST(5)), "insufficient_funds");
        for (let i = 0; i < 6; i++) assert.equal(await ledger.reserve(id, `job:free-${i}`, 1n), "reserved");
        assert.equal(await ledger.reserve(id, "job:y", 1n, JOBS_AT_MOST(6)), "too_many_open_holds");
        assert.equal(await ledger.reserve("nobody", "job:z", 1n, JOBS_AT_MOST(1)), "unknown_account");
      });

      it("when 60 reservations from two writers race under a limit of 5 with funds for all, then exactly 5 are held", async () => {
        const id = account();
        await ledger.createAccount(id, "a", 1_000n);
        const outcomes = await Promise.all(
          Array.from({ length: 60 }, (_, i) => (i % 2 ? ledger : other).reserve(id, `job:race-${i}`, 1n, JOBS_AT_MOST(5))),
        );
        assert.equal(outcomes.filter((o) => o === "reserved").length, 5);
        assert.equal(outcomes.filter((o) => o === "too_many_open_holds").length, 55);
        assert.deepEqual(await ledger.balance(id), { balance: 1_000n, reserved: 5n });
      });

      it("when a settlement asks more than hold + available, then it charges that much, the balance stays ≥ 0 and the shortfall is recorded once", async () => {
        const id = account();
        await ledger.createAccount(id, "a", 1_000n);
        assert.equal(await ledger.reserve(id, "job:big", 300n), "reserved");
        assert.equal(await ledger.reserve(id, "job:other", 200n), "reserved");
        // Available is 1000 − 500 = 500: job:big may take its 300 and those 500, never job:other's 200.
        assert.deepEqual(await ledger.settle(id, "job:big", 900n), { charged: 800n, shortfall: 100n });
        assert.deepEqual(await ledger.balance(id), { balance: 200n, reserved: 200n });
        assert.deepEqual(await ledger.settle(id, "job:big", 900n), { charged: 800n, shortfall: 100n, repeated: true },
          "a repeated settlement moves nothing and reports the settlement recorded");
        assert.deepEqual(await ledger.balance(id), { balance: 200n, reserved: 200n });
        assert.deepEqual(await ledger.shortfalls(id), [{ reservationId: "job:big", amount: 100n }]);
        // The other hold is still fully covered; settling it within its hold records no shortfall.
        assert.deepEqual(await ledger.settle(id, "job:other", 150n), { charged: 150n, shortfall: 0n });
        assert.deepEqual(await ledger.balance(id), { balance: 50n, reserved: 0n });
        assert.deepEqual(await ledger.shortfalls(id), [{ reservationId: "job:big", amount: 100n }]);
      });

      it("when a capped settlement is repeated (the reaper after a crash), then it answers the charge recorded, marked repeated, and moves nothing", async () => {
        const id = account();
        await ledger.createAccount(id, "a", 700n);
        assert.equal(await ledger.reserve(id, "job:capped", 400n), "reserved");
        assert.equal(await ledger.reserve(id, "job:kept", 100n), "reserved");
        const first = await ledger.settle(id, "job:capped", 1_000n);
        assert.deepEqual(first, { charged: 600n, shortfall: 400n });
        const balanceAfter = await ledger.balance(id);
        // The repeat asks the same amount (the job's stored usage cost), from this writer and from another.
        assert.deepEqual(await ledger.settle(id, "job:capped", 1_000n), { charged: 600n, shortfall: 400n, repeated: true });
        assert.deepEqual(await other.settle(id, "job:capped", 1_000n), { charged: 600n, shortfall: 400n, repeated: true });
        assert.deepEqual(await ledger.balance(id), balanceAfter, "a repeat moves no money");
        assert.deepEqual(await ledger.shortfalls(id), [{ reservationId: "job:capped", amount: 400n }], "and records no second shortfall");
      });

      it("when a settlement in full is repeated, then it moves nothing and answers the charge recorded (Cassandra: undefined, the amount asked was charged)", async () => {
        const id = account();
        await ledger.createAccount(id, "a", 1_000n);
        assert.equal(await ledger.reserve(id, "job:full", 300n), "reserved");
        assert.deepEqual(await ledger.settle(id, "job:full", 250n), { charged: 250n, shortfall: 0n });
        const repeat = await ledger.settle(id, "job:full", 250n);
        if (subject.remembersFullSettlements) assert.deepEqual(repeat, { charged: 250n, shortfall: 0n, repeated: true });
        else assert.equal(repeat, undefined);
        assert.deepEqual(await ledger.balance(id), { balance: 750n, reserved: 0n });
        // A released hold was never settled: a later settle answers nothing and charges nothing.
        assert.equal(await ledger.reserve(id, "job:released", 300n), "reserved");
        await ledger.release(id, "job:released");
        assert.equal(await ledger.settle(id, "job:released", 250n), undefined);
        assert.equal(await ledger.settle(id, "job:never-held", 250n), undefined);
        assert.deepEqual(await ledger.balance(id), { balance: 750n, reserved: 0n });
        assert.deepEqual(await ledger.shortfalls(id), []);
      });

      it("when the whole balance is held by one hold and usage exceeds it, then the balance ends at exactly zero", async () => {
        const id = account();
        await ledger.createAccount(id, "a", 500n);
        assert.equal(await ledger.reserve(id, "job:all", 500n), "reserved");
        assert.deepEqual(await ledger.settle(id, "job:all", 2_000n), { charged: 500n, shortfall: 1_500n });
        assert.deepEqual(await ledger.balance(id), { balance: 0n, reserved: 0n });
        assert.deepEqual(await ledger.shortfalls(id), [{ reservationId: "job:all", amount: 1_500n }]);
        await ledger.release(id, "job:all");
        assert.deepEqual(await ledger.balance(id), { balance: 0n, reserved: 0n });
      });
    });
  }

  describe("SqliteLedger across connections", () => {
    it("when four connections (threads) race 40 reservations each under a limit of 7, then exactly 7 are held", async () => {
      const stores = await openSqlite();
      await stores.stores.ledger.createAccount("shared", "s", 1_000_000n);
      const start = new Int32Array(new SharedArrayBuffer(4));
      // Workers do not inherit the tsx loader: each registers it, then runs this file's worker part.
      const boot = `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then(({ register }) => { register(); return import(${JSON.stringify(import.meta.url)}); })`;
      const workers = Array.from({ length: 4 }, (_, w) =>
        new Worker(boot, {
          eval: true,
          workerData: {
            path: stores.path, accountId: "shared", limit: 7, start,
            ids: Array.from({ length: 40 }, (_, i) => `job:w${w}-${i}`),
          },
        }),
      );
      const handles = workers.map((worker) => {
        let ready!: () => void;
        let done!: (outcomes: ReserveOutcome[]) => void;
        let fail!: (error: unknown) => void;
        const handle = {
          ready: new Promise<void>((resolve, reject) => ((ready = resolve), (fail = reject))),
          outcomes: new Promise<ReserveOutcome[]>((resolve) => (done = resolve)),
        };
        worker.on("message", (message: { ready?: boolean; outcomes?: ReserveOutcome[] }) => {
          if (message.ready) ready();
          if (message.outcomes) done(message.outcomes);
        });
        worker.on("error", (error) => fail(error));
        return handle;
      });
      await Promise.all(handles.map((h) => h.ready));
      Atomics.store(start, 0, 1);
      Atomics.notify(start, 0);
      const outcomes = (await Promise.all(handles.map((h) => h.outcomes))).flat();
      await Promise.all(workers.map((worker) => worker.terminate()));
      assert.equal(outcomes.length, 160);
      assert.equal(outcomes.filter((o) => o === "reserved").length, 7);
      assert.equal(outcomes.filter((o) => o === "too_many_open_holds").length, 153);
      assert.deepEqual(await stores.stores.ledger.balance("shared"), { balance: 1_000_000n, reserved: 7n });
    });
  });

  describe("CassandraLedger: a settlement whose answer was lost", { skip: !contactPoints && "needs real Cassandra" }, () => {
    it("when the conditional write of a short settlement commits but its answer is lost, then the shortfall is still reported once", async () => {
      cassandraClient ??= await openSession({
        contactPoints: contactPoints!.split(","), keyspace, localDataCenter: "datacenter1",
        replication: { strategy: "SimpleStrategy", factor: 1 },
      });
      const plain = new CassandraLedger(cassandraClient);
      await plain.createAccount("lost-settle", "x", 1_000n);
      assert.equal(await plain.reserve("lost-settle", "job:r", 1_000n), "reserved");
      const losing = new CassandraLedger(losingNextUpdate(cassandraClient));
      assert.deepEqual(await losing.settle("lost-settle", "job:r", 1_300n), { charged: 1_000n, shortfall: 300n });
      assert.deepEqual(await losing.settle("lost-settle", "job:r", 1_300n), { charged: 1_000n, shortfall: 300n, repeated: true },
        "a repeat answers the settlement recorded, and moves nothing");
      assert.deepEqual(await plain.balance("lost-settle"), { balance: 0n, reserved: 0n });
      assert.deepEqual(await plain.shortfalls("lost-settle"), [{ reservationId: "job:r", amount: 300n }]);
    });
  });
}

/** A client whose next conditional UPDATE of accounts is applied by the server but whose answer is lost (a coordinator timeout). */
function losingNextUpdate(client: CassandraClient): CassandraClient {
  let left = 1;
  return new Proxy(client, {
    get(target, property, receiver) {
      if (property !== "execute") return Reflect.get(target, property, receiver);
      return async (query: string, params?: unknown[], options?: object) => {
        const result = await target.execute(query, params as never, options as never);
        if (left > 0 && query.startsWith("UPDATE account_ledger") && query.includes(" IF ")) {
          left--;
          throw new cassandra.errors.ResponseError(cassandra.types.responseErrorCodes.writeTimeout, "simulated: answer lost");
        }
        return result;
      };
    },
  });
}
