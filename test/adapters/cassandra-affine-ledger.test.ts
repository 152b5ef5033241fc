import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { CassandraLedger } from "../../src/adapters/cassandra/cassandra-ledger.js";
import { AffineLedger, startLedgerPeer, type LedgerPeer } from "../../src/adapters/cassandra/affine-ledger.js";
import { LedgerMembers } from "../../src/adapters/cassandra/ledger-members.js";
import { openSession, type CassandraClient } from "../../src/adapters/cassandra/cassandra-session.js";
import type { Ledger } from "../../src/ports/ledger.js";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { DependencyUnavailableError } from "../../src/ports/dependency.js";

const contactPoints = process.env.CASSANDRA_CONTACT_POINTS;
const skip = !contactPoints && "needs CASSANDRA_CONTACT_POINTS (real Cassandra)";
const SECRET = "a-cluster-secret-for-tests";

/** A member as a process has it: its own ledger (counting the money operations it commits), its peer endpoint, its routing ledger. */
interface TestMember {
  readonly id: string;
  readonly committed: { count: number };
  readonly peer: LedgerPeer;
  readonly members: LedgerMembers;
  readonly ledger: AffineLedger;
}

function counting(ledger: Ledger, committed: { count: number }): Ledger {
  return new Proxy(ledger, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (property !== "reserve" && property !== "settle" && property !== "release") return typeof value === "function" ? value.bind(target) : value;
      return (...args: unknown[]) => {
        committed.count++;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

describe("AffineLedger: each account's money operations committed by its owner", { skip }, () => {
  const keyspace = `gen_t_affine_${process.pid}`;
  let client: CassandraClient;
  const cluster = `c-${randomUUID().slice(0, 8)}`;
  const started: TestMember[] = [];

  async function member(id: string): Promise<TestMember> {
    const committed = { count: 0 };
    const local = counting(new CassandraLedger(client), committed);
    const peer = await startLedgerPeer({ host: "127.0.0.1", port: 0, secret: SECRET, ledger: local });
    const members = new LedgerMembers(client, cluster, { id, address: peer.address });
    await members.start();
    const made = { id, committed, peer, members, ledger: new AffineLedger(local, members, SECRET) };
    started.push(made);
    return made;
  }

  /** An account id the member owns, as every member sees it. */
  function ownedBy(owner: TestMember, ...others: TestMember[]): string {
    for (;;) {
      const id = `acct-${randomUUID().slice(0, 8)}`;
      if ([owner, ...others].every((m) => m.members.owner(id)?.id === owner.id)) return id;
    }
  }

  before(async () => {
    client = await openSession({
      contactPoints: contactPoints!.split(","), keyspace, localDataCenter: "datacenter1",
      replication: "{'class': 'SimpleStrategy', 'replication_factor': 1}",
    });
  });
  after(async () => {
    for (const m of started) {
      await m.members.stop().catch(() => undefined);
      await m.peer.close();
    }
    await client.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`);
    await client.shutdown();
  });

  it("when two members take one account's reservations and releases, then its owner commits all of them, the money is exact and forwarded releases keep their reasons", async () => {
    const a = await member(`a-${randomUUID().slice(0, 6)}`);
    const b = await member(`b-${randomUUID().slice(0, 6)}`);
    await Promise.all([a.members.refresh(), b.members.refresh()]); // each has seen the other
    const account = ownedBy(a, b);
    await a.ledger.createAccount(account, "x", 1_000n);
    const before = { a: a.committed.count, b: b.committed.count };
    const outcomes = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).ledger.reserve(account, `r-${i}`, 10n)));
    assert.ok(outcomes.every((o) => o === "reserved"));
    await Promise.all(Array.from({ length: 20 }, (_, i) => b.ledger.release(account, `r-${i}`, i % 2 ? undefined : "client_gone")));
    assert.deepEqual(await b.ledger.settle(account, "r-20", 7n), { charged: 7n, shortfall: 0n });
    assert.equal(b.committed.count - before.b, 0, "the member that does not own the account committed none");
    assert.equal(a.committed.count - before.a, 61);
    assert.deepEqual(await b.ledger.balance(account), { balance: 993n, reserved: 190n });
    const releases = (await b.ledger.entries({ accountId: account, limit: 100 })).entries.filter((e) => e.type === "release");
    assert.equal(releases.length, 20);
    assert.equal(releases.filter((e) => e.reason === "client_gone").length, 10);
    assert.equal(releases.filter((e) => e.reason === undefined).length, 10);
  });

  it("when 200 reservations race through two members against funds for exactly 50, then exactly 50 are held", async () => {
    const a = await member(`a-${randomUUID().slice(0, 6)}`);
    const b = await member(`b-${randomUUID().slice(0, 6)}`);
    await Promise.all([a.members.refresh(), b.members.refresh()]);
    const account = `acct-${randomUUID().slice(0, 8)}`;
    await a.ledger.createAccount(account, "x", 50n);
    const outcomes = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 ? a : b).ledger.reserve(account, `race-${i}`, 1n)));
    assert.equal(outcomes.filter((o) => o === "reserved").length, 50);
    assert.deepEqual(await a.ledger.balance(account), { balance: 50n, reserved: 50n });
  });

  it("when the owner's endpoint is gone before its membership expires, then the others commit locally, and a repeat moves nothing", async () => {
    const a = await member(`a-${randomUUID().slice(0, 6)}`);
    const b = await member(`b-${randomUUID().slice(0, 6)}`);
    await Promise.all([a.members.refresh(), b.members.refresh()]);
    const account = ownedBy(a, b);
    await b.ledger.createAccount(account, "x", 100n);
    assert.equal(await b.ledger.reserve(account, "before", 30n), "reserved"); // through a
    await a.peer.close(); // a died: its row is still there for a few seconds
    const before = b.committed.count;
    assert.equal(await b.ledger.reserve(account, "before", 30n), "reserved", "a repeat of a hold a took");
    assert.equal(await b.ledger.reserve(account, "after", 60n), "reserved");
    assert.equal(await b.ledger.reserve(account, "too-much", 20n), "insufficient_funds");
    assert.deepEqual(await b.ledger.settle(account, "before", 30n), { charged: 30n, shortfall: 0n });
    assert.equal(b.committed.count - before, 4, "committed by b itself");
    assert.deepEqual(await b.ledger.balance(account), { balance: 70n, reserved: 60n });
  });

  it("when a caller presents a wrong cluster secret, then the endpoint refuses it (401), and nothing moves", async () => {
    const a = await member(`a-${randomUUID().slice(0, 6)}`);
    const account = `acct-${randomUUID().slice(0, 8)}`;
    await a.ledger.createAccount(account, "x", 100n);
    const call = { calls: [{ op: "reserve", accountId: account, reservationId: "evil", amount: { $bigint: "100" } }] };
    const sameLength = "x".repeat(SECRET.length);
    for (const authorization of [`Bearer ${sameLength}`, "", `Bearer ${SECRET}x`, SECRET]) {
      const response = await fetch(`${a.peer.address}/ledger/v1/calls`, {
        method: "POST", headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) }, body: JSON.stringify(call),
      });
      assert.equal(response.status, 401);
    }
    assert.deepEqual(await a.ledger.balance(account), { balance: 100n, reserved: 0n });
  });

  it("when a peer with the secret sends calls that are not well formed (a negative amount, a null, an unknown op), then they are refused (400) and nothing moves", async () => {
    const a = await member(`a-${randomUUID().slice(0, 6)}`);
    const account = `acct-${randomUUID().slice(0, 8)}`;
    await a.ledger.createAccount(account, "x", 100n);
    const bodies = [
      { calls: [{ op: "settle", accountId: account, reservationId: "r", amount: { $bigint: "-50" } }] },
      { calls: [{ op: "reserve", accountId: account, reservationId: "r", amount: "100" }] },
      { calls: [null] },
      { calls: [{ op: "credit", accountId: account, reservationId: "r", amount: { $bigint: "1" } }] },
      { calls: "all" },
    ];
    for (const body of bodies) {
      const response = await fetch(`${a.peer.address}/ledger/v1/calls`, {
        method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${SECRET}` }, body: JSON.stringify(body),
      });
      assert.equal(response.status, 400, JSON.stringify(body));
    }
    assert.deepEqual(await a.ledger.balance(account), { balance: 100n, reserved: 0n });
  });

  it("when the owner takes a forward and never answers, then the operation fails as unavailable (503) and is not committed by its sender", async () => {
    // An owner that reads every request and answers none (stuck): its work may yet land, so its sender must not commit too.
    const stuck = createServer((request) => request.resume());
    await new Promise<void>((resolve) => stuck.listen(0, "127.0.0.1", resolve));
    try {
      const stuckMember = new LedgerMembers(client, cluster, { id: `stuck-${randomUUID().slice(0, 6)}`, address: `http://127.0.0.1:${(stuck.address() as AddressInfo).port}` });
      await stuckMember.refresh();
      const committed = { count: 0 };
      const local = counting(new CassandraLedger(client), committed);
      const members = new LedgerMembers(client, cluster, undefined); // forwards only
      await members.refresh();
      const ledger = new AffineLedger(local, members, SECRET, 300);
      let account: string;
      do account = `acct-${randomUUID().slice(0, 8)}`; while (members.owner(account)?.address !== stuckMember.self!.address);
      await ledger.createAccount(account, "x", 100n);
      await assert.rejects(ledger.reserve(account, "r", 10n), (error: Error) => error instanceof DependencyUnavailableError);
      assert.equal(committed.count, 0);
      assert.deepEqual(await ledger.balance(account), { balance: 100n, reserved: 0n });
      await stuckMember.stop();
    } finally {
      stuck.closeAllConnections();
      stuck.close();
    }
  });
});
