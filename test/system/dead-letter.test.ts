// backends: embedded, real
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import kafkajs from "kafkajs";
import { BACKEND, call, createCustomer, eventually, finishedJob, realBackendEnv, startTestService } from "../support/harness.js";


const skip = BACKEND !== "real" && "needs TEST_BACKEND=real (Kafka)";

describe("webhook dead letters on Kafka", { skip }, () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  });

  it("a delivery that exhausts its retries lands on the dead-letter topic, where it stays readable", async () => {
    const env = realBackendEnv();
    const service = await startTestService({ ...env, WEBHOOK_RETRY_SCHEDULE: "50ms,100ms" });
    cleanups.push(() => service.close());
    let attempts = 0;
    const failing = createServer((_request, response) => {
      attempts++;
      response.writeHead(500).end();
    });
    await new Promise<void>((resolve) => failing.listen(0, "127.0.0.1", resolve));
    cleanups.push(async () => failing.close());
    const callback = `http://127.0.0.1:${(failing.address() as AddressInfo).port}/hook`;

    const customer = await createCustomer(service, "1.00");
    const created = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey,
      body: { model: "aimodel-2.5-flash-image", prompt: "nobody listens", callback_url: callback },
    });
    assert.equal(created.status, 202);
    await finishedJob(service, customer.apiKey, created.json.job_id);
    await eventually(async () => attempts, (n) => n === 3, { timeoutMs: 20_000, what: "three attempts" });

    // An operator's reader, long after the fact, from the beginning of the topic.
    const kafka = new kafkajs.Kafka({ brokers: env.KAFKA_BROKERS!.split(","), logLevel: kafkajs.logLevel.NOTHING });
    const consumer = kafka.consumer({ groupId: `${env.KAFKA_TOPIC_PREFIX}operator` });
    cleanups.push(() => consumer.disconnect());
    const letters: { jobId: string; attempts: number; lastStatus?: number; url: string }[] = [];
    await consumer.connect();
    await consumer.subscribe({ topic: `${env.KAFKA_TOPIC_PREFIX}webhook.dead-letter`, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void letters.push(JSON.parse(message.value!.toString())) });
    await eventually(async () => letters.length, (n) => n >= 1, { timeoutMs: 30_000, what: "the dead letter" });
    assert.equal(letters.length, 1);
    assert.equal(letters[0]!.jobId, created.json.job_id);
    assert.equal(letters[0]!.attempts, 3);
    assert.equal(letters[0]!.lastStatus, 500);
    assert.equal(letters[0]!.url, callback);
  });
});
