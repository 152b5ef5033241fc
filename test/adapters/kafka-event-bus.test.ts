// backends: embedded, real
import { after, before, describe, test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import kafkajs, { type Admin } from "kafkajs";
import { createKafkaEventBus, type KafkaEventBus, type KafkaEventBusOptions } from "../../src/adapters/kafka/kafka-event-bus.js";
import { TOPICS } from "../../src/ports/event-bus.js";
import { eventually } from "../support/harness.js";
import { lineLogger } from "../support/capture-log.js";

const BROKERS = process.env.KAFKA_BROKERS?.split(",").map((b) => b.trim()).filter(Boolean) ?? [];
const skip =
  BROKERS.length === 0 ? "KAFKA_BROKERS is not set: these tests need a real broker (bash infra/up.sh, then KAFKA_BROKERS=127.0.0.1:9092)" : false;

interface Received<T> {
  event: T;
  at: number;
}

/** Collects what a handler saw, with arrival times. */
function recorder<T>() {
  const seen: Received<T>[] = [];
  return {
    seen,
    events: () => seen.map((r) => r.event),
    handler: async (event: T) => {
      seen.push({ event, at: Date.now() });
    },
  };
}

describe("KafkaEventBus against a real broker", { skip }, () => {
  let admin: Admin;
  const logs: string[] = [];
  const cleanedUp = new Set<string>();

  before(async () => {
    admin = new kafkajs.Kafka({ clientId: "kafka-event-bus-test-admin", brokers: BROKERS, logLevel: kafkajs.logLevel.NOTHING }).admin();
    await admin.connect();
  });

  after(async () => {
    await admin.disconnect();
    const problems = logs.filter((line) => /ERROR|crash/i.test(line));
    if (problems.length > 0) console.error(`kafka logs during the tests:\n${problems.join("\n")}`);
  });

  /**
   * A bus with a unique topic prefix, so test runs never see each other's messages;
   * closed and its topics and groups deleted when the test ends.
   */
  async function openBus(t: TestContext, overrides: Partial<KafkaEventBusOptions> = {}): Promise<KafkaEventBus> {
    const prefix = overrides.topicPrefix ?? `test-${randomBytes(4).toString("hex")}.`;
    const started = Date.now();
    const bus = await createKafkaEventBus({
      brokers: BROKERS,
      clientId: `kafka-event-bus-test-${process.pid}`,
      topicPrefix: prefix,
      partitions: 3,
      delayTiersMs: [1000, 4000],
      logger: lineLogger((line) => logs.push(`${prefix} ${line}`)),
      ...overrides,
    });
    t.diagnostic(`bus ready (topics created, delay forwarder joined) in ${Date.now() - started} ms`);
    t.after(async () => {
      const closing = Date.now();
      await bus.close();
      t.diagnostic(`bus ${prefix} closed in ${Date.now() - closing} ms`);
      // Buses sharing a prefix share topics; deleting missing topics retries for seconds.
      if (cleanedUp.has(prefix)) return;
      cleanedUp.add(prefix);
      await admin.deleteTopics({ topics: Object.values(bus.topics) }).catch(() => undefined);
      const { groups } = await admin.listGroups();
      const ours = groups.map((g) => g.groupId).filter((id) => id.startsWith(prefix));
      if (ours.length > 0) await admin.deleteGroups(ours).catch(() => undefined);
    });
    return bus;
  }

  async function timed<T>(t: TestContext, what: string, run: () => Promise<T>): Promise<T> {
    const started = Date.now();
    const result = await run();
    t.diagnostic(`${what} in ${Date.now() - started} ms`);
    return result;
  }

  test("delivers every event to each consumer group of the topic", async (t) => {
    const bus = await openBus(t);
    const workers = recorder<{ n: number }>();
    const auditors = recorder<{ n: number }>();
    await timed(t, "first group joined", () => bus.subscribe(TOPICS.generationRequested, "workers", workers.handler));
    await timed(t, "second group joined", () => bus.subscribe(TOPICS.generationRequested, "auditors", auditors.handler));

    const published = Date.now();
    for (const n of [1, 2, 3]) await bus.publish(TOPICS.generationRequested, `job-${n}`, { n });

    for (const group of [workers, auditors]) {
      await eventually(async () => group.events().map((e) => e.n).sort(), (ns) => ns.length >= 3, { what: "three events in each group" });
      assert.deepEqual(group.events().map((e) => e.n).sort(), [1, 2, 3]);
    }
    t.diagnostic(`publish-to-delivery ${Math.max(...workers.seen.map((r) => r.at)) - published} ms`);
  });

  test("one group name used on two topics receives the events of both", async (t) => {
    const bus = await openBus(t);
    const finished = recorder<{ jobId: string }>();
    const deliveries = recorder<{ jobId: string }>();
    await bus.subscribe(TOPICS.jobFinished, "webhook-dispatchers", finished.handler);
    await bus.subscribe(TOPICS.webhookDelivery, "webhook-dispatchers", deliveries.handler);

    await bus.publish(TOPICS.jobFinished, "job-a", { jobId: "job-a" });
    await bus.publish(TOPICS.webhookDelivery, "job-b", { jobId: "job-b" });

    await eventually(async () => finished.seen.length + deliveries.seen.length, (n) => n >= 2, { what: "both topics delivered" });
    assert.deepEqual(finished.events(), [{ jobId: "job-a" }]);
    assert.deepEqual(deliveries.events(), [{ jobId: "job-b" }]);
  });

  test("keeps the events of one key in publish order", async (t) => {
    const bus = await openBus(t);
    const seen = recorder<{ key: string; n: number }>();
    await bus.subscribe(TOPICS.jobFinished, "ordered", seen.handler);

    for (let n = 0; n < 20; n++) {
      for (const key of ["job-x", "job-y"]) await bus.publish(TOPICS.jobFinished, key, { key, n });
    }

    await eventually(async () => seen.seen.length, (count) => count >= 40, { what: "40 events" });
    for (const key of ["job-x", "job-y"]) {
      const order = seen.events().filter((e) => e.key === key).map((e) => e.n);
      assert.deepEqual(order, Array.from({ length: 20 }, (_, n) => n), `order of ${key}`);
    }
  });

  test("delivers every one of many concurrent publishes", async (t) => {
    // What is checked is delivery, not PUBLISH_TIMEOUT (the outage tests check that): 200 publishes to a topic made
    // moments ago may wait longer than the 3 s default for their first acknowledgement beside a busy CI's other files.
    const bus = await openBus(t, { publishTimeoutMs: 30_000 });
    const seen = recorder<{ id: number }>();
    await bus.subscribe(TOPICS.generationRequested, "bulk", seen.handler);

    const ids = Array.from({ length: 200 }, (_, id) => id);
    const started = Date.now();
    await Promise.all(ids.map((id) => bus.publish(TOPICS.generationRequested, `job-${id % 10}`, { id })));
    t.diagnostic(`200 concurrent publishes acknowledged in ${Date.now() - started} ms`);

    await eventually(async () => new Set(seen.events().map((e) => e.id)).size, (n) => n >= 200, { what: "200 distinct events" });
    assert.deepEqual([...new Set(seen.events().map((e) => e.id))].sort((a, b) => a - b), ids);
  });

  test("redelivers an event whose handler threw, without holding back the events after it", async (t) => {
    const errors: { topic: string; error: unknown }[] = [];
    // The smallest tier is shorter than the redelivery delay, which picks the 1000 ms tier.
    const bus = await openBus(t, {
      delayTiersMs: [300, 1000, 4000],
      redeliveryDelayMs: 1000,
      onHandlerError: (topic, error) => errors.push({ topic, error }),
    });
    const attempts: { n: number; at: number }[] = [];
    const handled: number[] = [];
    await bus.subscribe<{ n: number }>(TOPICS.webhookDelivery, "flaky", async ({ n }) => {
      attempts.push({ n, at: Date.now() });
      if (n === 1 && attempts.filter((a) => a.n === 1).length === 1) throw new Error("first attempt fails");
      handled.push(n);
    });

    for (const n of [1, 2, 3]) await bus.publish(TOPICS.webhookDelivery, "job-same", { n });

    await eventually(async () => [...handled].sort(), (ns) => ns.length >= 3, { timeoutMs: 20_000, what: "all three handled" });
    assert.deepEqual([...handled].sort(), [1, 2, 3]);
    assert.equal(attempts.filter((a) => a.n === 1).length, 2, "the failed event is delivered exactly once more");
    // The retry goes through the smallest delay tier, so 2 and 3 are handled first.
    assert.deepEqual(handled.slice(0, 2), [2, 3]);
    const [first, second] = attempts.filter((a) => a.n === 1);
    assert.ok(second!.at - first!.at >= 1000 - 20, `redelivered after ${second!.at - first!.at} ms, expected the 1000 ms tier`);
    assert.equal(errors.length, 1);
    assert.equal(errors[0]!.topic, TOPICS.webhookDelivery);
    assert.match(String(errors[0]!.error), /first attempt fails/);
  });

  test("delays delivery until due, and a long delay does not hold back a shorter one", async (t) => {
    const bus = await openBus(t);
    const seen = recorder<{ name: string }>();
    await bus.subscribe(TOPICS.webhookDelivery, "delayed", seen.handler);

    // Same key, so only the tiers (not partitions) keep them apart. "mid" asks for a
    // delay between the tiers and rides the 4000 ms tier.
    const due: Record<string, number> = {};
    for (const [name, delayMs] of [["long", 4000], ["mid", 2000], ["short", 1000]] as const) {
      due[name] = Date.now() + delayMs;
      await bus.publish(TOPICS.webhookDelivery, "job-delayed", { name }, { delayMs });
    }

    await eventually(async () => seen.seen.length, (n) => n >= 3, { timeoutMs: 20_000, what: "three delayed events" });
    const at = Object.fromEntries(seen.seen.map((r) => [r.event.name, r.at]));
    for (const name of ["short", "mid", "long"]) {
      assert.ok(at[name]! >= due[name]! - 20, `${name} arrived ${due[name]! - at[name]!} ms before it was due`);
      t.diagnostic(`${name}: arrived ${at[name]! - due[name]!} ms after due`);
    }
    assert.ok(at.short! < at.long!, "the 1000 ms tier is not blocked by the 4000 ms tier");
    assert.ok(at.short! - due.short! < 1500, `short arrived ${at.short! - due.short!} ms late`);
  });

  test("two bus instances in one group share the partitions and hand them over on close", async (t) => {
    // Two processes of one service: same prefix, same group.
    const a = await openBus(t);
    const b = await openBus(t, { topicPrefix: a.topics[TOPICS.generationRequested]!.slice(0, -TOPICS.generationRequested.length) });
    const onA = recorder<{ id: number }>();
    const onB = recorder<{ id: number }>();
    const subA = await timed(t, "first member joined", () => a.subscribe(TOPICS.generationRequested, "workers", onA.handler));
    // The existing member has to notice the rebalance and rejoin before this resolves.
    await timed(t, "second member joined (rebalance)", () => b.subscribe(TOPICS.generationRequested, "workers", onB.handler));

    for (let id = 0; id < 30; id++) await a.publish(TOPICS.generationRequested, `job-${id}`, { id });
    const all = () => [...onA.events(), ...onB.events()].map((e) => e.id);
    await eventually(async () => all().length, (n) => n >= 30, { what: "30 events across both members" });
    assert.deepEqual(all().sort((x, y) => x - y), Array.from({ length: 30 }, (_, id) => id), "each event handled once");
    assert.ok(onA.seen.length > 0 && onB.seen.length > 0, `split ${onA.seen.length}/${onB.seen.length}`);

    const leaving = Date.now();
    await subA.close();
    for (let id = 30; id < 40; id++) await a.publish(TOPICS.generationRequested, `job-${id}`, { id });
    await eventually(async () => onB.events().filter((e) => e.id >= 30).length, (n) => n >= 10, { what: "the remaining member to take over" });
    t.diagnostic(`after the first member left, the other had all 10 new events ${Date.now() - leaving} ms later`);
    assert.equal(onA.events().filter((e) => e.id >= 30).length, 0);
  });

  test("close() returns promptly with live subscriptions and pending delayed events", async (t) => {
    const bus = await openBus(t);
    const subscription = await bus.subscribe(TOPICS.jobFinished, "closing-a", async () => {});
    await bus.subscribe(TOPICS.jobFinished, "closing-b", async () => {});
    await bus.publish(TOPICS.jobFinished, "job-1", { n: 1 }, { delayMs: 4000 });
    await bus.publish(TOPICS.jobFinished, "job-2", { n: 2 });

    const started = Date.now();
    await bus.close();
    const took = Date.now() - started;
    t.diagnostic(`close() took ${took} ms`);
    // Idle consumers stop within one fetch wait (1 s) plus leaving the group.
    assert.ok(took < 5_000, `close() took ${took} ms`);
    await assert.rejects(bus.publish(TOPICS.jobFinished, "job-3", { n: 3 }), /closed/);
    await subscription.close();
  });

  test("close() gives up waiting for a handler that never returns", async (t) => {
    const bus = await openBus(t, { closeTimeoutMs: 3_000 });
    let release!: () => void;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    t.after(() => release());
    let started = false;
    await bus.subscribe(TOPICS.generationRequested, "stuck", async () => {
      started = true;
      await stuck;
    });
    await bus.publish(TOPICS.generationRequested, "job-stuck", { n: 1 });
    await eventually(async () => started, (s) => s, { what: "the handler to start" });

    const closing = Date.now();
    await bus.close();
    const took = Date.now() - closing;
    t.diagnostic(`close() with a stuck handler took ${took} ms`);
    assert.ok(took >= 2_000 && took < 4_000, `close() took ${took} ms, bound 3000 ms`);
    assert.ok(logs.some((line) => line.includes("did not stop in time")), "the abandoned consumer is logged");
  });
});
