// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import cassandra from "cassandra-driver";
import { CassandraJobStore } from "../../src/adapters/cassandra/cassandra-job-store.js";
import { CassandraLedger } from "../../src/adapters/cassandra/ledger/cassandra-ledger.js";
import { openSession, type CassandraClient } from "../../src/adapters/cassandra/cassandra-session.js";
import { completeJob, settleJob, startJob } from "../../src/domain/jobs/job-state-machine.js";
import type { Job } from "../../src/domain/jobs/job.js";
import { jobListContract } from "./job-list-contract.js";
import { apiKeyChangeContract, apiKeyListingContract } from "./api-key-contract.js";
import { deliveryListingContract } from "./delivery-contract.js";
import { panelSessionContract } from "./panel-session-contract.js";
import { CassandraPanelSessionStore } from "../../src/adapters/cassandra/cassandra-panel-session-store.js";
import { CassandraDeliveryLog } from "../../src/adapters/cassandra/cassandra-delivery-log.js";
import { CassandraApiKeyStore } from "../../src/adapters/cassandra/cassandra-api-key-store.js";
import { copyKeysByAccount } from "../../src/adapters/cassandra/cassandra-session.js";
import { randomUUID } from "node:crypto";
import { DependencyUnavailableError } from "../../src/ports/dependency.js";
import type { Observation } from "../../src/ports/telemetry.js";
import type { ReserveOutcome } from "../../src/ports/ledger.js";
import { eventually } from "../support/eventually.js";

const contactPoints = process.env.CASSANDRA_CONTACT_POINTS;
const skip = !contactPoints && "needs CASSANDRA_CONTACT_POINTS (real Cassandra)";

/**
 * A client whose next conditional write on `table` is applied by the real
 * server but whose answer is lost, as when a coordinator times out after Paxos
 * committed: the adapters must find out by reading, not by writing again.
 */
function losingAnswers(client: CassandraClient, table: string, times: number, meanwhile?: () => Promise<void>): CassandraClient {
  let left = times;
  /** Before the loss is told, `meanwhile` runs: what other writers do while the answer is on its way. */
  const lose = async (query: string) => {
    if (left > 0 && query.startsWith(`UPDATE ${table}`) && query.includes(" IF ")) {
      left--;
      await meanwhile?.();
      throw new cassandra.errors.ResponseError(cassandra.types.responseErrorCodes.writeTimeout, "simulated: answer lost");
    }
  };
  return new Proxy(client, {
    get(target, property, receiver) {
      if (property === "execute") {
        return async (query: string, params?: unknown[], options?: object) => {
          const result = await target.execute(query, params as never, options as never);
          await lose(query);
          return result;
        };
      }
      if (property === "executeBatch") {
        return async (queries: { query: string; params: unknown[] }[]) => {
          const result = await target.executeBatch(queries as never);
          await lose(queries[0]!.query);
          return result;
        };
      }
      return Reflect.get(target, property, receiver);
    },
  });
}

/** The client, counting the conditional batches it runs (a deep account's rounds). */
function countingBatches(client: CassandraClient): { client: CassandraClient; batches: () => number } {
  let batches = 0;
  const counted = new Proxy(client, {
    get(target, property, receiver) {
      if (property !== "executeBatch") return Reflect.get(target, property, receiver);
      return (queries: never) => {
        batches++;
        return target.executeBatch(queries);
      };
    },
  });
  return { client: counted, batches: () => batches };
}

describe("Cassandra stores against a real server", { skip }, () => {
  const keyspace = `gen_t_adapters_${process.pid}`;
  let client: CassandraClient;
  before(async () => {
    client = await openSession({
      contactPoints: contactPoints!.split(","), keyspace, localDataCenter: "datacenter1",
      replication: { strategy: "SimpleStrategy", factor: 1 },
    });
  });
  after(async () => {
    await client.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`);
    await client.shutdown();
  });

  apiKeyListingContract(async () => new CassandraApiKeyStore(client), () => randomUUID().slice(0, 8));
  apiKeyChangeContract(async () => new CassandraApiKeyStore(client), () => randomUUID().slice(0, 8));
  deliveryListingContract(async () => new CassandraDeliveryLog(client, 3600), () => randomUUID().slice(0, 8));
  panelSessionContract(async () => new CassandraPanelSessionStore(client), () => randomUUID().slice(0, 8));

  it("when keys were written before api_keys_by_account existed, then the version 8 step lists them under their account", async () => {
    const store = new CassandraApiKeyStore(client);
    const accountId = `acct_old_${randomUUID().slice(0, 8)}`;
    await store.create({ keyId: `k_old_${accountId}`, accountId, secretHash: `h_old_${accountId}`, models: ["*"], revoked: false, createdAt: new Date() });
    await client.execute("DELETE FROM api_keys_by_account WHERE account_id = ?", [accountId]); // as before version 8
    assert.deepEqual(await store.listByAccount(accountId), []);
    await copyKeysByAccount(client);
    await copyKeysByAccount(client); // a second run (a process that died midway) changes nothing
    assert.deepEqual((await store.listByAccount(accountId)).map((r) => r.keyId), [`k_old_${accountId}`]);
  });

  it("ledger: a reservation whose answer was lost is resolved by reading, and held exactly once", async () => {
    const ledger = new CassandraLedger(losingAnswers(client, "account_ledger", 1));
    await ledger.createAccount("acct-lost", "x", 1_000n);
    assert.equal(await ledger.reserve("acct-lost", "r1", 300n), "reserved");
    assert.deepEqual(await ledger.balance("acct-lost"), { balance: 1_000n, reserved: 300n });
    await ledger.settle("acct-lost", "r1", 250n);
    await ledger.settle("acct-lost", "r1", 250n); // a replayed settlement moves nothing
    assert.deepEqual(await ledger.balance("acct-lost"), { balance: 750n, reserved: 0n });
  });

  it("ledger: a credit whose answer was lost is applied once", async () => {
    const ledger = new CassandraLedger(losingAnswers(client, "account_ledger", 1));
    await ledger.createAccount("acct-credit", "x", 0n);
    await ledger.credit("acct-credit", 500n);
    assert.deepEqual(await ledger.balance("acct-credit"), { balance: 500n, reserved: 0n });
  });

  it("ledger: two writers (two processes' ledgers) racing on one hot account never overdraw it", async () => {
    const a = new CassandraLedger(client);
    const b = new CassandraLedger(client);
    await a.createAccount("acct-hot", "x", 50n);
    const outcomes = await Promise.all(
      Array.from({ length: 200 }, (_, i) => (i % 2 ? a : b).reserve("acct-hot", `hot-${i}`, 1n)),
    );
    assert.equal(outcomes.filter((o) => o === "reserved").length, 50);
    assert.equal(outcomes.filter((o) => o === "insufficient_funds").length, 150);
    assert.deepEqual(await a.balance("acct-hot"), { balance: 50n, reserved: 50n });
  });

  it("ledger: when operations of an account queue a moment after its round ended (as forwarded callers do), then the next round waits for as many as the last carried", async () => {
    const rounds: number[] = [];
    const telemetry = { observe: (o: Observation) => void (o.kind === "ledger_round" && rounds.push(o.operations)) };
    // The first round takes at least 10 ms, so the next may wait up to 5 ms for operations on their way.
    let slowed = false;
    const slow = new Proxy(client, {
      get(target, property, receiver) {
        if (property !== "executeBatch") return Reflect.get(target, property, receiver);
        return async (queries: never) => {
          if (!slowed) {
            slowed = true;
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
          return target.executeBatch(queries);
        };
      },
    });
    const ledger = new CassandraLedger(slow, Date.now, telemetry);
    await ledger.createAccount("acct-gather", "x", 1_000n);
    const first = Array.from({ length: 20 }, (_, i) => ledger.reserve("acct-gather", `g-first-${i}`, 1n));
    await new Promise(setImmediate); // the first round is under way
    const early = Array.from({ length: 5 }, (_, i) => ledger.reserve("acct-gather", `g-early-${i}`, 1n));
    // The rest queue two turns after the first round's answers: after the ledger looked at its queue and found 5.
    const late = Promise.all(first).then(() => new Promise<ReserveOutcome[]>((resolve) => setImmediate(() => setImmediate(() => {
      resolve(Promise.all(Array.from({ length: 15 }, (_, i) => ledger.reserve("acct-gather", `g-late-${i}`, 1n))));
    }))));
    const outcomes = [...(await Promise.all(first)), ...(await Promise.all(early)), ...(await late)];
    assert.deepEqual([...new Set(outcomes)], ["reserved"]);
    assert.deepEqual(rounds, [20, 20]);
    assert.deepEqual(await ledger.balance("acct-gather"), { balance: 1_000n, reserved: 40n });
  });

  it("ledger: when a round's callers ask again at once while others queued during it, then the next round carries both groups, not one after the other", async () => {
    const rounds: number[] = [];
    const ledger = new CassandraLedger(client, Date.now, { observe: (o: Observation) => void (o.kind === "ledger_round" && rounds.push(o.operations)) });
    await ledger.createAccount("acct-groups", "x", 1_000n);
    // Each caller takes three holds one after another, asking again as soon as it is answered.
    const caller = async (name: string) => {
      for (let i = 0; i < 3; i++) assert.equal(await ledger.reserve("acct-groups", `${name}-${i}`, 1n), "reserved");
    };
    const a = Array.from({ length: 10 }, (_, i) => caller(`grp-a${i}`));
    await new Promise(setImmediate); // group a's first round is under way; group b queues behind it
    const b = Array.from({ length: 10 }, (_, i) => caller(`grp-b${i}`));
    await Promise.all([...a, ...b]);
    assert.deepEqual(rounds, [10, 20, 20, 10]);
    assert.deepEqual(await ledger.balance("acct-groups"), { balance: 1_000n, reserved: 60n });
  });

  it("ledger: when fewer operations queue than the last round carried and no more come, then the next round goes with them after a moment", async () => {
    const rounds: number[] = [];
    const ledger = new CassandraLedger(client, Date.now, { observe: (o: Observation) => void (o.kind === "ledger_round" && rounds.push(o.operations)) });
    await ledger.createAccount("acct-gather-alone", "x", 1_000n);
    const first = Array.from({ length: 20 }, (_, i) => ledger.reserve("acct-gather-alone", `a-first-${i}`, 1n));
    await new Promise(setImmediate);
    const early = Array.from({ length: 3 }, (_, i) => ledger.reserve("acct-gather-alone", `a-early-${i}`, 1n));
    assert.deepEqual([...new Set([...(await Promise.all(first)), ...(await Promise.all(early))])], ["reserved"]);
    assert.deepEqual(rounds, [20, 3]);
    // One caller at a time never waits for a crowd: each of its rounds carries the one operation.
    for (let i = 0; i < 10; i++) await ledger.release("acct-gather-alone", `a-first-${i}`);
    assert.deepEqual(await ledger.balance("acct-gather-alone"), { balance: 1_000n, reserved: 13n });
  });

  it("ledger: when another writer changed the account since this writer's last round, then this writer judges by the row as it is now, not as it left it", async () => {
    const a = new CassandraLedger(client);
    const b = new CassandraLedger(client);
    await a.createAccount("acct-moved", "x", 100n);
    assert.equal(await a.reserve("acct-moved", "a-1", 40n), "reserved"); // a now knows the row it wrote
    assert.equal(await b.reserve("acct-moved", "b-1", 60n), "reserved"); // the row moved under a
    assert.equal(await a.reserve("acct-moved", "a-2", 1n), "insufficient_funds");
    await b.credit("acct-moved", 30n);
    assert.equal(await a.reserve("acct-moved", "a-3", 30n), "reserved");
    assert.deepEqual(await a.settle("acct-moved", "b-1", 60n), { charged: 60n, shortfall: 0n }); // a hold b took, ended by a
    assert.equal(await b.reserve("acct-moved", "b-2", 1n), "insufficient_funds"); // b's own last row is stale now
    await b.release("acct-moved", "a-1");
    assert.deepEqual(await a.balance("acct-moved"), { balance: 70n, reserved: 30n });
    const { entries } = await a.entries({ accountId: "acct-moved", limit: 20 });
    assert.deepEqual(entries.map((e) => [e.type, e.balanceAfter, e.reservedAfter]).reverse(), [
      ["credit", 100n, 0n], ["hold", 100n, 40n], ["hold", 100n, 100n], ["credit", 130n, 100n], ["hold", 130n, 130n], ["charge", 70n, 70n], ["release", 70n, 30n],
    ]);
  });

  it("ledger: when an account's holds come and go in rounds that end and take them again, then its hold rows are exactly its open holds and the tallies agree", async () => {
    const counting = countingBatches(client);
    const ledger = new CassandraLedger(counting.client);
    await ledger.createAccount("acct-deep", "x", 1_000_000n);
    const rowHolds = async () => {
      const rows = (await client.execute("SELECT hold_id, amount, memo FROM account_ledger WHERE account_id = ?", ["acct-deep"])).rows.filter((r) => r.hold_id !== ""); // "" is the money row
      return {
        holds: Object.fromEntries(rows.map((r) => [r.hold_id as string, r.amount as bigint])),
        memos: rows.filter((r) => r.memo !== null).map((r) => r.hold_id as string).sort(),
      };
    };
    const ids = Array.from({ length: 400 }, (_, i) => `deep-${String(i).padStart(3, "0")}`);
    // 400 holds arrive together: rounds of up to 128, crossing the line while the account fills.
    const taken = await Promise.all(ids.map((id) => ledger.reserve("acct-deep", id, 10n, { memo: { jobId: id, model: "m" } })));
    assert.ok(taken.every((o) => o === "reserved"));
    // Deep now: releases, settlements and new holds in the same rounds (asked in one turn, so they share rounds);
    // holds ended and taken again within one round, with and without a memo; a hold taken and ended in one round.
    await Promise.all([
      ...ids.slice(0, 100).map((id) => ledger.release("acct-deep", id)),
      ...ids.slice(100, 150).map((id) => ledger.settle("acct-deep", id, 7n)),
      ...Array.from({ length: 20 }, (_, i) => ledger.reserve("acct-deep", `late-${i}`, 5n, { memo: { model: "m" } })),
      ledger.release("acct-deep", "deep-398"), ledger.reserve("acct-deep", "deep-398", 3n), ledger.release("acct-deep", "deep-398"),
      ledger.release("acct-deep", "deep-397"), ledger.reserve("acct-deep", "deep-397", 4n),
      ledger.release("acct-deep", "deep-396"), ledger.reserve("acct-deep", "deep-396", 6n, { memo: { jobId: "again", model: "m2" } }),
      ledger.reserve("acct-deep", "fleeting", 1n), ledger.release("acct-deep", "fleeting"),
    ]);
    assert.ok(counting.batches() > 0, "the rounds wrote hold rows with the account's money");
    const open = [...ids.slice(150, 398), "deep-399", ...Array.from({ length: 20 }, (_, i) => `late-${i}`)].sort();
    let row = await rowHolds();
    assert.deepEqual(Object.keys(row.holds).sort(), open);
    assert.deepEqual(row.memos, open.filter((id) => id !== "deep-397")); // taken again without a memo: the old one left
    assert.equal(row.holds["deep-399"], 10n);
    assert.equal(row.holds["deep-397"], 4n);
    assert.equal(row.holds["deep-396"], 6n);
    assert.equal(row.holds["late-3"], 5n);
    const held = 247n * 10n + 4n + 6n + 20n * 5n; // deep-150..395 and deep-399 at 10; deep-396 and deep-397 taken again; late-*
    assert.deepEqual(await ledger.balance("acct-deep"), { balance: 1_000_000n - 50n * 7n, reserved: held });
    assert.equal(Object.values(row.holds).reduce((sum, amount) => sum + amount, 0n), held);
    // A writer that never saw the account reads the row: it agrees, to the last unit.
    const fresh = new CassandraLedger(client);
    const available = 1_000_000n - 350n - held;
    assert.equal(await fresh.reserve("acct-deep", "too-much", available + 1n), "insufficient_funds");
    assert.equal(await fresh.reserve("acct-deep", "all-of-it", available), "reserved");
    assert.equal(await fresh.release("acct-deep", "all-of-it"), undefined);
    await Promise.all(ids.slice(150, 390).map((id) => ledger.release("acct-deep", id)));
    row = await rowHolds();
    const left = [...ids.slice(390, 398), "deep-399", ...Array.from({ length: 20 }, (_, i) => `late-${i}`)].sort();
    assert.deepEqual(Object.keys(row.holds).sort(), left);
    assert.deepEqual(row.memos, left.filter((id) => id !== "deep-397"));
    const { entries } = await ledger.entries({ accountId: "acct-deep", limit: 1000 });
    assert.equal(entries.filter((e) => e.type === "hold").length, 400 + 20 + 3 + 1 + 1);
    assert.equal(entries.reduce((sum, e) => sum + e.reservedChange, 0n), 7n * 10n + 6n + 4n + 20n * 5n);
  });

  it("ledger: when a deep account's round loses its answer, then it is resolved by reading and applied once", async () => {
    const setup = new CassandraLedger(client);
    await setup.createAccount("acct-deep-lost", "x", 1_000_000n);
    await Promise.all(Array.from({ length: 300 }, (_, i) => setup.reserve("acct-deep-lost", `h-${i}`, 10n)));
    const ledger = new CassandraLedger(losingAnswers(client, "account_ledger", 1));
    await Promise.all([ledger.settle("acct-deep-lost", "h-0", 9n), ledger.release("acct-deep-lost", "h-1"), ledger.reserve("acct-deep-lost", "new", 5n)]);
    assert.deepEqual(await ledger.balance("acct-deep-lost"), { balance: 1_000_000n - 9n, reserved: 298n * 10n + 5n });
    const rows = (await client.execute("SELECT hold_id FROM account_ledger WHERE account_id = ? AND hold_id > ''", ["acct-deep-lost"])).rows;
    assert.equal(rows.length, 299);
    assert.deepEqual(await ledger.settle("acct-deep-lost", "h-0", 9n), undefined); // a repeat moves nothing
  });

  it("ledger: when other writers win every round of an account, then the operation gives up as a dependency outage (503), having moved nothing", async () => {
    const setup = new CassandraLedger(client);
    await setup.createAccount("acct-contended", "x", 100n);
    // Every conditional write of this client expects a version the row never has: as if another writer won each round.
    const expectingNever = (query: string, params: unknown[]) =>
      query.startsWith("UPDATE account_ledger") && query.includes(" IF version = ?") ? [...params.slice(0, -1), -1n] : params;
    const losing = new Proxy(client, {
      get(target, property, receiver) {
        if (property === "execute") {
          return (query: string, params?: unknown[], options?: object) => target.execute(query, expectingNever(query, params ?? []) as never, options as never);
        }
        if (property === "executeBatch") {
          return (queries: { query: string; params: unknown[] }[]) =>
            target.executeBatch(queries.map(({ query, params }) => ({ query, params: expectingNever(query, params) })) as never);
        }
        return Reflect.get(target, property, receiver);
      },
    });
    const ledger = new CassandraLedger(losing);
    await assert.rejects(ledger.reserve("acct-contended", "r", 10n), (error: Error) => error instanceof DependencyUnavailableError && /too much contention/.test(error.message));
    assert.deepEqual(await setup.balance("acct-contended"), { balance: 100n, reserved: 0n });
  });

  it("ledger: when the rows a process keeps would pass their bound of open holds, then a deeper row is read by its next round and a shallow one is not", async () => {
    let reads = 0;
    const counting = new Proxy(client, {
      get(target, property, receiver) {
        if (property !== "execute") return Reflect.get(target, property, receiver);
        return (query: string, params?: never, options?: never) => {
          if (query.startsWith("SELECT balance, reserved, version")) reads++;
          return target.execute(query, params, options);
        };
      },
    });
    const ledger = new CassandraLedger(counting, Date.now, undefined, 10);
    await ledger.createAccount("acct-kept-shallow", "x", 1_000n);
    await ledger.createAccount("acct-kept-deep", "x", 1_000n);
    await Promise.all(Array.from({ length: 5 }, (_, i) => ledger.reserve("acct-kept-shallow", `s-${i}`, 1n)));
    await Promise.all(Array.from({ length: 20 }, (_, i) => ledger.reserve("acct-kept-deep", `d-${i}`, 1n)));
    const before = reads;
    assert.equal(await ledger.reserve("acct-kept-shallow", "s-next", 1n), "reserved");
    assert.equal(reads, before, "the shallow row was kept: its round read nothing");
    assert.equal(await ledger.reserve("acct-kept-deep", "d-next", 1n), "reserved");
    assert.equal(reads, before + 1, "the row deeper than the bound was read");
    assert.deepEqual(await ledger.balance("acct-kept-deep"), { balance: 1_000n, reserved: 21n });
  });

  it("ledger: when a credit's answer is lost while another writer moves the account 640 times, then the credit is applied once", async () => {
    const id = `acct-credit-late-${randomUUID().slice(0, 8)}`;
    const other = new CassandraLedger(client);
    const busy = async () => {
      for (let round = 0; round < 5; round++) {
        await Promise.all(Array.from({ length: 128 }, (_, i) => other.reserve(id, `r-${round}-${i}`, 1n)));
      }
    };
    const ledger = new CassandraLedger(losingAnswers(client, "account_ledger", 1, busy));
    await ledger.createAccount(id, "x", 1_000_000n);
    // The credit answers its own entry's figures (decision 0039), taken before the other writer's holds.
    assert.deepEqual(await ledger.credit(id, 7n), { balance: 1_000_007n, reserved: 0n });
    assert.deepEqual(await other.balance(id), { balance: 1_000_007n, reserved: 640n });
  });

  it("ledger: when a capped settlement's answer is lost, then it answers what it charged and its shortfall, and a repeat moves nothing", async () => {
    const id = `acct-settle-lost-${randomUUID().slice(0, 8)}`;
    const setup = new CassandraLedger(client);
    await setup.createAccount(id, "x", 100n);
    assert.equal(await setup.reserve(id, "s1", 60n), "reserved");
    assert.equal(await setup.reserve(id, "s2", 30n), "reserved");
    const ledger = new CassandraLedger(losingAnswers(client, "account_ledger", 1));
    // Hold 60, available 10: at most 70 of the 95 asked.
    assert.deepEqual(await ledger.settle(id, "s1", 95n), { charged: 70n, shortfall: 25n });
    assert.deepEqual(await ledger.balance(id), { balance: 30n, reserved: 30n });
    assert.deepEqual(await ledger.settle(id, "s1", 95n), { charged: 70n, shortfall: 25n, repeated: true });
    assert.deepEqual(await ledger.balance(id), { balance: 30n, reserved: 30n });
  });

  it("ledger: when an account of the table before version 10 is first used, then it moves to account_ledger once, with its money, holds, memos, tallies and history", async () => {
    const id = `acct-old-${randomUUID().slice(0, 8)}`;
    const memo = (jobId: string | undefined) => JSON.stringify({ ...(jobId ? { jobId } : {}), model: "m", keyId: "k1" });
    // As version 9 left it: open holds in maps of the row; no journal (the row predates the statement).
    await client.execute(
      "INSERT INTO accounts (account_id, name, balance, reserved, holds, hold_memos, version, last_ops, created_at, shortfalls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      [id, "old", 1_000n, 70n, { "job:a": 30n, "job:b": 25n, "text:c": 15n }, { "job:a": memo("a"), "job:b": memo("b"), "text:c": memo(undefined) }, 41n, [], new Date(), { "job:z": 5n }],
    );
    const one = new CassandraLedger(client);
    const two = new CassandraLedger(client);
    assert.deepEqual(await one.balance(id), { balance: 1_000n, reserved: 70n }, "read from the old row before the move");
    await assert.rejects(one.createAccount(id, "again", 1n), /exists/);
    // Two writers move it at once: one move applies, both see one account.
    const limit = { limit: 3, countedPrefix: "job:" };
    const [first, second] = await Promise.all([
      one.reserve(id, "job:d", 100n, { maxOpenHolds: limit, memo: { jobId: "d", model: "m", keyId: "k1" } }),
      two.reserve(id, "job:e", 100n, { maxOpenHolds: limit, memo: { jobId: "e", model: "m", keyId: "k1" } }),
    ]);
    const won = first === "reserved" ? "job:d" : "job:e";
    assert.deepEqual([first, second].sort(), ["reserved", "too_many_open_holds"], "job:a and job:b were counted from the moved rows");
    assert.deepEqual(await two.settle(id, "job:a", 40n), { charged: 40n, shortfall: 0n });
    await one.release(id, "text:c");
    assert.deepEqual(await two.keyAccount(id, "k1"), { spending: (await two.keyAccount(id, "k1")).spending, held: 125n, openJobs: 2 });
    assert.deepEqual(await one.balance(id), { balance: 960n, reserved: 125n });
    assert.deepEqual(await one.shortfalls(id), [{ reservationId: "job:z", amount: 5n }]);
    const holdRows = (await client.execute("SELECT hold_id, amount FROM account_ledger WHERE account_id = ? AND hold_id > ''", [id])).rows;
    assert.deepEqual(holdRows.map((r) => [r.hold_id, r.amount]), [["job:b", 25n], [won, 100n]]);
    const { entries } = await one.entries({ accountId: id, limit: 20 });
    assert.deepEqual(entries.map((e) => [e.type, e.amount, e.reservedAfter]).reverse(), [
      ["credit", 1_000n, 0n], ["hold", 0n, 30n], ["hold", 0n, 55n], ["hold", 0n, 70n], // carried forward
      ["hold", 0n, 170n], ["charge", -40n, 140n], ["release", 0n, 125n],
    ]);
    assert.equal(entries.reduce((sum, e) => sum + e.amount, 0n), 960n);
  });

  it("ledger: when a writer that never read an account repeats a reservation whose hold is open, then it answers reserved and moves nothing, even without the funds for it", async () => {
    const id = `acct-repeat-${randomUUID().slice(0, 8)}`;
    const first = new CassandraLedger(client);
    await first.createAccount(id, "x", 100n);
    assert.equal(await first.reserve(id, "r-1", 60n), "reserved");
    assert.equal(await new CassandraLedger(client).reserve(id, "r-1", 60n), "reserved", "funds for it: the new hold's IF NOT EXISTS failed, and the read found it");
    assert.equal(await new CassandraLedger(client).reserve(id, "r-1", 90n), "reserved", "no funds for it: the refusal was judged again with its hold read");
    await Promise.all([first.reserve(id, "r-1", 60n), first.reserve(id, "r-2", 10n), first.reserve(id, "r-2", 10n)]);
    assert.deepEqual(await first.balance(id), { balance: 100n, reserved: 70n });
  });

  it("ledger: when a writer that never read a deep account settles one hold, then it reads the money row and that hold, not the backlog", async () => {
    const id = `acct-backlog-${randomUUID().slice(0, 8)}`;
    const setup = new CassandraLedger(client);
    await setup.createAccount(id, "x", 1_000_000n);
    for (let round = 0; round < 4; round++) {
      await Promise.all(Array.from({ length: 128 }, (_, i) => setup.reserve(id, `b-${round}-${i}`, 1n, { memo: { jobId: `${round}-${i}`, model: "m" } })));
    }
    // Values read: each column of each row, a collection's entries each.
    let valuesRead = 0;
    const counting = new Proxy(client, {
      get(target, property, receiver) {
        if (property !== "execute") return Reflect.get(target, property, receiver);
        return async (query: string, params?: never, options?: never) => {
          const result = await target.execute(query, params, options);
          for (const row of query.startsWith("SELECT") ? result.rows : []) {
            for (const value of Object.values(row)) {
              valuesRead += value !== null && typeof value === "object" && !(value instanceof Date) ? Object.keys(value).length : 1;
            }
          }
          return result;
        };
      },
    });
    const fresh = new CassandraLedger(counting);
    assert.deepEqual(await fresh.settle(id, "b-2-7", 1n), { charged: 1n, shortfall: 0n });
    assert.equal(await fresh.reserve(id, "b-new", 1n), "reserved");
    assert.ok(valuesRead < 50, `read ${valuesRead} values of an account with 512 open holds`);
    assert.deepEqual(await fresh.balance(id), { balance: 999_999n, reserved: 512n });
  });

  /** The rows 110,000 ended holds leave (deleted rows of the partition), written directly: through the ledger it would take minutes. */
  async function endedHolds(accountId: string, prefix: string): Promise<void> {
    const ended = Array.from({ length: 110_000 }, (_, i) => `${prefix}${String(i).padStart(6, "0")}`);
    for (let start = 0; start < ended.length; start += 4 * 1_000) {
      await Promise.all([0, 1, 2, 3].map((part) => {
        const ids = ended.slice(start + part * 1_000, start + (part + 1) * 1_000);
        return ids.length === 0 ? undefined : client.batch(ids.map((hold) => ({ query: "DELETE FROM account_ledger WHERE account_id = ? AND hold_id = ?", params: [accountId, hold] })));
      }));
    }
  }

  it("ledger: when an account's first capped job arrives after 110,000 ended text calls, one still open, then the job rule is counted without reading their tombstones", async () => {
    const id = `acct-text-${randomUUID().slice(0, 8)}`;
    const ledger = new CassandraLedger(client);
    await ledger.createAccount(id, "x", 1_000n);
    assert.equal(await ledger.reserve(id, "job:text-call-open", 10n), "reserved");
    await endedHolds(id, "job:text-call-ended-");
    await assert.rejects(client.execute("SELECT hold_id FROM account_ledger WHERE account_id = ? LIMIT 3", [id]), "the tombstones are real");
    const cap = { maxOpenHolds: { limit: 1, countedPrefix: "job:", exceptPrefix: "job:text-call-" } };
    const fresh = new CassandraLedger(client);
    assert.equal(await fresh.reserve(id, "job:first", 10n, cap), "reserved", "the open text call is not counted");
    assert.equal(await fresh.reserve(id, "job:second", 10n, cap), "too_many_open_holds");
    await fresh.release(id, "job:first");
    assert.equal(await new CassandraLedger(client).reserve(id, "job:third", 10n, cap), "reserved", "the count followed the release");
  });

  it("ledger: when a repeated reservation and the settlement of its open hold share a round of a writer that never read it, then the hold is settled once", async () => {
    const id = `acct-repeat-settle-${randomUUID().slice(0, 8)}`;
    const first = new CassandraLedger(client);
    await first.createAccount(id, "x", 100n);
    assert.equal(await first.reserve(id, "r", 40n), "reserved");
    const fresh = new CassandraLedger(client);
    const [reserved, settled] = await Promise.all([fresh.reserve(id, "r", 40n), fresh.settle(id, "r", 30n)]); // asked in one turn: one round
    assert.equal(reserved, "reserved");
    assert.deepEqual(settled, { charged: 30n, shortfall: 0n });
    assert.equal(await first.settle(id, "r", 30n), undefined, "a repeat moves nothing");
    assert.deepEqual(await first.balance(id), { balance: 70n, reserved: 0n });
    assert.equal((await client.execute("SELECT hold_id FROM account_ledger WHERE account_id = ? AND hold_id > ''", [id])).rowLength, 0);
  });

  it("ledger: when a credit's round loses to another writer, then it is applied once, on the row as the other left it", async () => {
    const id = `acct-credit-lost-${randomUUID().slice(0, 8)}`;
    const a = new CassandraLedger(client);
    const b = new CassandraLedger(client);
    await a.createAccount(id, "x", 100n);
    assert.equal(await a.reserve(id, "a-1", 10n), "reserved"); // a keeps the row it wrote
    assert.equal(await b.reserve(id, "b-1", 20n), "reserved"); // and b moves it
    assert.deepEqual(await a.credit(id, 5n), { balance: 105n, reserved: 30n });
    assert.deepEqual(await b.settle(id, "a-1", 10n), { charged: 10n, shortfall: 0n });
    assert.deepEqual(await a.balance(id), { balance: 95n, reserved: 20n });
  });

  it("ledger: when an account has ended more holds than Cassandra reads past (100,000 tombstones), then its rounds, balance and statement still work", async () => {
    const id = `acct-ended-${randomUUID().slice(0, 8)}`;
    const setup = new CassandraLedger(client);
    await setup.createAccount(id, "x", 1_000n);
    const cap = { maxOpenHolds: { limit: 10, countedPrefix: "job:" } };
    assert.equal(await setup.reserve(id, "job:open", 100n, cap), "reserved"); // the rule is counted while no hold is open
    await endedHolds(id, "job:ended-");
    // Real: a read of the partition's rows in order fails on them (what reading static columns would do).
    await assert.rejects(client.execute("SELECT hold_id FROM account_ledger WHERE account_id = ? LIMIT 3", [id]));
    const fresh = new CassandraLedger(client);
    assert.deepEqual(await fresh.balance(id), { balance: 1_000n, reserved: 100n });
    assert.equal(await fresh.reserve(id, "job:next", 50n, cap), "reserved");
    assert.deepEqual(await fresh.settle(id, "job:open", 80n), { charged: 80n, shortfall: 0n });
    await fresh.release(id, "job:next");
    assert.equal((await fresh.keyAccount(id, "k")).held, 0n);
    assert.deepEqual(await fresh.balance(id), { balance: 920n, reserved: 0n });
    const { entries } = await fresh.entries({ accountId: id, limit: 10 });
    assert.deepEqual(entries.map((e) => e.type), ["release", "charge", "hold", "hold", "credit"]);
  });

  it("jobs: a transition whose answer was lost reports applied, and a second transition from the old state fails", async () => {
    const store = new CassandraJobStore(losingAnswers(client, "jobs", 1), 86_400);
    const job: Job = {
      id: "00000000-0000-4000-8000-000000000001", accountId: "a", model: "aimodel-3-pro-image", kind: "image",
      status: "queued", input: { prompt: "p", inputImageUrls: [], inputBlobKeys: [] }, createdAt: new Date(),
      timeoutSeconds: 60, reservationId: "r", reserved: 5n, charged: 0n,
    };
    await store.registerIntent(job.id, job.accountId, job.createdAt);
    await store.create(job);
    const started = startJob(job, new Date(), { owner: "w1", expiresAt: new Date(Date.now() + 10_000) });
    assert.equal(await store.transition(started, { status: "queued" }), true);
    assert.equal(await store.transition(started, { status: "queued" }), false);
    assert.equal(await store.renewLease(job.id, "w2", new Date()), false);
    assert.equal(await store.renewLease(job.id, "w1", new Date(Date.now() + 20_000)), true);
    const done = completeJob(started, new Date(), { text: "t" }, 5n);
    assert.equal(await store.transition(done, { status: "processing", leaseOwner: "w2" }), false);
    assert.equal(await store.transition(done, { status: "processing", leaseOwner: "w1" }), true);
    const stored = await store.get(job.id);
    assert.equal(stored?.status, "done");
    assert.equal(stored?.charged, 5n);
    assert.equal(stored?.createdAt.toISOString(), job.createdAt.toISOString());
    assert.equal((await store.listUnfinished(10)).entries.some((u) => u.jobId === job.id), true);
    await store.markFinalized(job.id);
    assert.equal((await store.listUnfinished(10)).entries.some((u) => u.jobId === job.id), false);
  });

  it("jobs: an account's jobs are listed newest first from jobs_by_account, filtered, paged below the cursor, and only that account's", async () => {
    await jobListContract(new CassandraJobStore(client, 86_400));
  });

  it("jobs: the listing rows expire with the job (JOB_RETENTION from its last step), and a row whose job is gone is skipped", async () => {
    const retention = 3;
    const store = new CassandraJobStore(client, retention);
    const accountId = `acct-ttl-${process.pid}`;
    const job: Job = {
      id: "00000000-0000-4000-8000-0000000000aa", accountId, model: "aimodel-3-pro-image", kind: "image",
      status: "queued", input: { prompt: "p", inputImageUrls: [], inputBlobKeys: [] }, createdAt: new Date(),
      timeoutSeconds: 60, reservationId: "r-ttl", reserved: 5n, charged: 0n,
    };
    await store.create(job);
    const day = Math.floor(job.createdAt.getTime() / 86_400_000);
    const ttl = async () =>
      (await client.execute("SELECT TTL(model) AS ttl FROM jobs_by_account WHERE account_id = ? AND day = ?", [accountId, day])).first()?.ttl as
        | number
        | null
        | undefined;
    // While the job runs, its row outlives any job's run (JOB_RETENTION + 7 days).
    assert.ok((await ttl())! > 7 * 86_400, `ttl ${await ttl()}`);
    const started = startJob(job, new Date(), { owner: "w", expiresAt: new Date(Date.now() + 10_000) });
    assert.equal(await store.transition(started, { status: "queued" }), true);
    assert.equal(await store.transition(settleJob(completeJob(started, new Date(), { text: "t" }, 5n)), { status: "processing", leaseOwner: "w" }), true);
    assert.ok((await ttl())! <= retention, `ttl ${await ttl()} after the last step`);
    assert.deepEqual((await store.listByAccount({ accountId, limit: 10 })).jobs.map((listed) => listed.id), [job.id]);

    // Gone with the job, by the TTL alone (polled: expiry is to the second).
    await eventually(async () => (await ttl()) === undefined && (await store.get(job.id)) === undefined, Boolean, {
      timeoutMs: 20_000,
      intervalMs: 200,
      what: "the job and its listing row to expire",
    });
    assert.deepEqual(await store.listByAccount({ accountId, limit: 10 }), { jobs: [], next: undefined });

    // An index row whose job was never stored (its acceptance was fenced off) lists nothing.
    const fenced = { ...job, id: "00000000-0000-4000-8000-0000000000ab", createdAt: new Date() };
    assert.equal(await store.abandonIntent(fenced.id), true);
    await assert.rejects(store.create(fenced));
    assert.deepEqual((await store.listByAccount({ accountId, limit: 10 })).jobs, []);
  });
});
