// backends: embedded, real
/**
 * The balance.low outbox on Cassandra (decision 0038, migrations 0018 and 0019), driven step by step: a round that
 * crossed the threshold applied, and its process stopped before handing the alert over; the relay of the process
 * started next hands it over, once. An announced alert whose round did not apply is never handed over, and its
 * pending row is dropped after the grace.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { openSession, type CassandraClient } from "../../src/adapters/cassandra/cassandra-session.js";
import { ALERT_GRACE_MS } from "../../src/adapters/cassandra/ledger/balance-alerts.js";
import { CassandraLedger } from "../../src/adapters/cassandra/ledger/cassandra-ledger.js";
import { InProcessEventBus } from "../../src/adapters/memory/in-process-event-bus.js";
import { createBalanceAlertRelay, type BalanceLowDue } from "../../src/core/webhooks/balance-alerts.js";
import { parseMoney } from "../../src/domain/money.js";
import { TOPICS } from "../../src/ports/event-bus.js";
import { silentLogger } from "../../src/ports/logger.js";
import { eventually } from "../support/eventually.js";

const contactPoints = process.env.CASSANDRA_CONTACT_POINTS;
const skip = !contactPoints && "needs CASSANDRA_CONTACT_POINTS (real Cassandra)";

/** A process's webhooks role: the relay over its ledger, and what reached its bus. */
async function webhooksRole(ledger: CassandraLedger) {
  const bus = new InProcessEventBus();
  const handed: BalanceLowDue[] = [];
  await bus.subscribe<{ alert?: BalanceLowDue }>(TOPICS.webhookDelivery, "webhook-dispatchers", async (event) => {
    if (event.alert) handed.push(event.alert);
  });
  return { bus, handed, relay: createBalanceAlertRelay({ balanceAlerts: ledger, bus, logger: silentLogger }) };
}

describe("the balance.low outbox on Cassandra", { skip }, () => {
  const keyspace = `gen_t_alerts_${process.pid}`;
  let client: CassandraClient;
  before(async () => {
    client = await openSession({
      contactPoints: contactPoints!.split(","), keyspace, localDataCenter: "datacenter1", replication: { strategy: "SimpleStrategy", factor: 1 },
    });
  });
  after(async () => {
    await client?.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`);
    await client?.shutdown();
  });

  const pendingRows = async () => (await client.execute("SELECT alert_id FROM balance_alert_pending WHERE bucket = 'pending'")).rows.map((r) => r.alert_id as string);

  it("when a round crossed the threshold and its process stopped before the hand-over, then the next process's relay hands the alert over, once", async () => {
    const accountId = `acct-${randomUUID()}`;
    const first = new CassandraLedger(client);
    await first.createAccount(accountId, "low", parseMoney("1.00"));
    await first.updateAccount(accountId, { lowBalanceThreshold: parseMoney("0.98") });
    assert.equal(await first.reserve(accountId, "job:one", parseMoney("0.039")), "reserved"); // available 0.961: crossed
    assert.equal((await first.account(accountId))?.lowBalance, true);

    // The process stops before its relay hands the alert over: its bus is gone.
    const stopped = await webhooksRole(first);
    await stopped.bus.close();
    await assert.rejects(stopped.relay.pass());
    assert.equal(stopped.handed.length, 0);

    // The next process (a new ledger, nothing in memory) hands it over.
    const next = await webhooksRole(new CassandraLedger(client));
    assert.equal(await next.relay.pass(), 1);
    const [alert] = await eventually(() => next.handed, (handed) => handed.length === 1, { what: "the alert on the bus" });
    assert.deepEqual([alert!.accountId, alert!.available, alert!.threshold], [accountId, "0.961", "0.98"]);
    assert.match(alert!.alertId, /^bal_/);
    assert.ok(!(await pendingRows()).includes(alert!.alertId), "its pending row is removed");
    const map = (await client.execute("SELECT balance_alerts FROM account_ledger WHERE account_id = ? AND hold_id = ''", [accountId])).first()?.balance_alerts;
    assert.equal(map ?? null, null, "and its map entry");

    assert.equal(await next.relay.pass(), 0, "a second pass hands nothing over");
    assert.equal(await first.reserve(accountId, "job:two", parseMoney("0.039")), "reserved"); // still below: no new alert
    assert.equal(await next.relay.pass(), 0);
    await next.bus.close();
  });

  it("when two processes' relays pass together, then whatever each hands over is the one alert, by its one id", async () => {
    const accountId = `acct-${randomUUID()}`;
    const ledger = new CassandraLedger(client);
    await ledger.createAccount(accountId, "two", parseMoney("1.00"));
    await ledger.updateAccount(accountId, { lowBalanceThreshold: parseMoney("0.50") });
    assert.equal(await ledger.reserve(accountId, "job:big", parseMoney("0.60")), "reserved"); // available 0.40: crossed
    const [a, b] = [await webhooksRole(new CassandraLedger(client)), await webhooksRole(new CassandraLedger(client))];
    await Promise.all([a.relay.pass(), b.relay.pass()]);
    const handed = await eventually(() => [...a.handed, ...b.handed], (all) => all.length >= 1, { what: "the alert on a bus" });
    assert.equal(new Set(handed.map((alert) => alert.alertId)).size, 1, "one webhook-id");
    assert.ok(a.handed.length <= 1 && b.handed.length <= 1);
    assert.deepEqual([handed[0]!.available, handed[0]!.threshold], ["0.40", "0.50"]);
    assert.equal(await a.relay.pass() + await b.relay.pass(), 0, "handed over, then removed");
    await Promise.all([a.bus.close(), b.bus.close()]);
  });

  it("when an alert was announced but its round did not apply, then it is never handed over and its pending row is dropped after the grace", async () => {
    const accountId = `acct-${randomUUID()}`;
    const ledger = new CassandraLedger(client);
    await ledger.createAccount(accountId, "lost", parseMoney("1.00"));
    const alertId = `bal_${randomUUID()}`;
    await client.execute("INSERT INTO balance_alert_pending (bucket, alert_id, account_id, created_at) VALUES ('pending', ?, ?, ?)",
      [alertId, accountId, new Date()], { prepare: true });
    assert.deepEqual(await ledger.pendingBalanceAlerts(100), []);
    assert.ok((await pendingRows()).includes(alertId), "young: its round may still be in flight");

    const later = new CassandraLedger(client, () => Date.now() + ALERT_GRACE_MS + 1_000);
    assert.deepEqual(await later.pendingBalanceAlerts(100), []);
    assert.ok(!(await pendingRows()).includes(alertId), "dropped once older than the grace");
  });
});
