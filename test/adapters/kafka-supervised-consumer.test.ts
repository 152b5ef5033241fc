// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import kafkajs, { type Admin, type Consumer } from "kafkajs";
import { startSupervisedConsumer } from "../../src/adapters/kafka/supervised-consumer.js";
import { ensureTopics } from "../../src/adapters/kafka/kafka-topics.js";
import { eventually } from "../support/harness.js";
import { lineLogger } from "../support/capture-log.js";

const BROKERS = process.env.KAFKA_BROKERS?.split(",").map((b) => b.trim()).filter(Boolean) ?? [];
const skip = BROKERS.length === 0 ? "KAFKA_BROKERS is not set: needs a real broker (bash infra/up.sh)" : false;

describe("a supervised Kafka consumer against a real broker", { skip }, () => {
  const kafka = new kafkajs.Kafka({ clientId: `supervised-consumer-test-${process.pid}`, brokers: BROKERS, logLevel: kafkajs.logLevel.NOTHING });
  const topic = `test-${randomBytes(4).toString("hex")}.supervised`;
  const groupId = `${topic}.group`;
  let admin: Admin;

  before(async () => {
    admin = kafka.admin();
    await admin.connect();
    // As the service creates its topics: a KRaft broker may answer UNKNOWN_TOPIC_OR_PARTITION until it has applied a new topic.
    await ensureTopics(admin, [{ topic, numPartitions: 1 }], lineLogger(() => undefined));
  });

  after(async () => {
    await admin.deleteGroups([groupId]).catch(() => undefined);
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  });

  it("when kafkajs gives a consumer up after an error it deems final, then a new member of the group takes over and the message is handled", async () => {
    const seen: string[] = [];
    const crashes: { restart: boolean; consumer: Consumer }[] = [];
    const logs: string[] = [];
    const members: Consumer[] = [];
    const supervised = await startSupervisedConsumer({
      label: groupId,
      logger: lineLogger((line) => logs.push(line)),
      initialDelayMs: 50,
      create: () => {
        const consumer = kafka.consumer({ groupId, sessionTimeout: 10_000, heartbeatInterval: 1_000, maxWaitTimeInMs: 100, retry: { retries: 2, restartOnFailure: async () => true } });
        consumer.on(consumer.events.CRASH, (event) => crashes.push({ restart: event.payload.restart, consumer }));
        members.push(consumer);
        return consumer;
      },
      start: async (consumer) => {
        await consumer.connect();
        await consumer.subscribe({ topics: [topic], fromBeginning: true });
        await consumer.run({
          eachMessage: async ({ message }) => {
            const value = message.value!.toString();
            seen.push(value);
            // What kafkajs does with a protocol error it deems final (e.g. ILLEGAL_GENERATION on a commit): crash, no restart.
            if (seen.length === 1) throw new kafkajs.KafkaJSNonRetriableError("the group moved on without this member");
          },
        });
      },
    });
    try {
      const producer = kafka.producer();
      await producer.connect();
      await producer.send({ topic, messages: [{ key: "k", value: "the job" }] });
      await producer.disconnect();

      await eventually(async () => seen.length, (n) => n >= 2, { timeoutMs: 60_000, what: "the message handled again after the crash" });
      assert.deepEqual(seen.slice(0, 2), ["the job", "the job"], "the uncommitted message is delivered to the new member");
      assert.equal(crashes[0]?.restart, false, "kafkajs itself would not restart the first consumer");
      assert.equal(crashes[0]?.consumer, members[0]);
      assert.ok(members.length >= 2 && supervised.consumer === members.at(-1) && supervised.consumer !== members[0], "a new consumer runs");
      assert.ok(logs.some((line) => line.includes("replaced and running")), logs.join("\n"));
    } finally {
      await supervised.stop();
    }
  });
});
