// backends: embedded, real
/**
 * The audit trail of Cassandra's conditional writes (decision 0034, migration 0017), driven step by step: an event
 * whose conditional write applied but whose copy never happened (the writer "crashed") appears once the recovery runs;
 * one whose conditional write did not apply never appears, and its pending row is dropped.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { AuditOutbox, RECOVERY_GRACE_MS } from "../../src/adapters/cassandra/audit-outbox.js";
import { CassandraAuditLog } from "../../src/adapters/cassandra/cassandra-audit-log.js";
import { conditional, openSession, type CassandraClient } from "../../src/adapters/cassandra/cassandra-session.js";
import { CassandraLedger } from "../../src/adapters/cassandra/ledger/cassandra-ledger.js";
import { parseAuditQuery } from "../../src/domain/audit/audit-query.js";
import type { AuditRecord } from "../../src/ports/audit-log.js";

const contactPoints = process.env.CASSANDRA_CONTACT_POINTS;
const skip = !contactPoints && "needs CASSANDRA_CONTACT_POINTS (real Cassandra)";
const SECRET = Buffer.alloc(32, 7);

const recordOf = (kind: string, accountId?: string): AuditRecord => ({
  eventId: randomUUID(), at: new Date(), kind, actor: "admin", clientAddress: "127.0.0.1", accountId, subject: "s", after: '{"x":1}',
});

describe("the audit outbox of conditional writes", { skip }, () => {
  const keyspace = `gen_t_outbox_${process.pid}`;
  let client: CassandraClient;
  /** Recovery as it runs once the pending rows are older than the grace. */
  let later: AuditOutbox;
  before(async () => {
    client = await openSession({
      contactPoints: contactPoints!.split(","), keyspace, localDataCenter: "datacenter1", replication: { strategy: "SimpleStrategy", factor: 1 },
    });
    later = new AuditOutbox(client, () => Date.now() + RECOVERY_GRACE_MS + 1_000);
  });
  after(async () => {
    await client?.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`);
    await client?.shutdown();
  });

  const listed = async (accountId?: string) =>
    (await new CassandraAuditLog(client).list(parseAuditQuery(SECRET, { limit: 100, accountId }, new Date()))).records.map((r) => r.eventId);
  const pending = async () => (await client.execute("SELECT event_id FROM audit_pending WHERE bucket = 'pending'")).rows.map((r) => r.event_id as string);

  it("when a conditional write applied and its writer stopped before the copy, then the recovery copies its event, once", async () => {
    const record = recordOf("tool_price.set");
    const outbox = new AuditOutbox(client);
    const key = `tool:test-${randomUUID()}`;
    await outbox.announce(record, { table: "prices", column: "model", key });
    const written = await conditional(client, "INSERT INTO prices (model, prices, audit_outbox) VALUES (?, ?, ?) IF NOT EXISTS",
      [key, '{"per_call":"0.01"}', { [record.eventId]: JSON.stringify({ ...record, at: record.at.toISOString() }) }], { prepare: true });
    assert.equal(written.applied, true);
    assert.ok(!(await listed()).includes(record.eventId), "not copied yet, and too young for the recovery");
    assert.ok((await pending()).includes(record.eventId));

    assert.equal(await later.recover() >= 1, true);
    assert.deepEqual((await listed()).filter((id) => id === record.eventId), [record.eventId]);
    assert.ok(!(await pending()).includes(record.eventId), "resolved");
    await later.recover();
    assert.deepEqual((await listed()).filter((id) => id === record.eventId), [record.eventId], "still once");
  });

  it("when a conditional write did not apply and its writer stopped, then its event never appears and its pending row is dropped", async () => {
    const record = recordOf("price.updated");
    const key = `no-such-model-${randomUUID()}`;
    await new AuditOutbox(client).announce(record, { table: "prices", column: "model", key });
    const written = await conditional(client, "UPDATE prices SET prices = ?, audit_outbox = audit_outbox + ? WHERE model = ? IF EXISTS",
      ["{}", { [record.eventId]: "{}" }, key], { prepare: true });
    assert.equal(written.applied, false);
    await later.recover();
    assert.ok(!(await listed()).includes(record.eventId));
    assert.ok(!(await pending()).includes(record.eventId));
  });

  it("when a credit's round applied and its writer stopped before any copy, then the recovery finds the event in the journal", async () => {
    // Every copy fails (the process "stops" after its round): the event is only in the journal and the pending row.
    const stopped = new Proxy(client, {
      get(target, property, receiver) {
        if (property === "loggedBatch" || property === "batch") return async () => { throw new Error("simulated: stopped before the copy"); };
        return Reflect.get(target, property, receiver);
      },
    });
    const accountId = `acct_${randomUUID().replaceAll("-", "")}`;
    await new CassandraLedger(client).createAccount(accountId, "outbox", 0n);
    const record = recordOf("credit.added", accountId);
    await assert.rejects(new CassandraLedger(stopped).credit(accountId, 1_000_000n, record), /stopped before the copy/);
    assert.equal((await new CassandraLedger(client).balance(accountId))?.balance, 1_000_000n, "the credit applied");
    assert.deepEqual(await listed(accountId), []);

    await later.recover();
    assert.deepEqual(await listed(accountId), [record.eventId]);
    assert.ok(!(await pending()).includes(record.eventId));
  });
});
