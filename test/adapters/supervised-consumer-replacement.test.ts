// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import type { Consumer } from "kafkajs";
import { startSupervisedConsumer } from "../../src/adapters/kafka/supervised-consumer.js";
import { eventually } from "../support/harness.js";
import { lineLogger } from "../support/capture-log.js";

/** What the supervisor uses of a kafkajs consumer: its CRASH event and disconnect(). */
class FakeConsumer extends EventEmitter {
  readonly events = { CRASH: "consumer.crash" };
  disconnected = false;
  crash(restart: boolean) {
    this.emit(this.events.CRASH, { payload: { error: new Error("the group moved on without this member"), restart } });
  }
  async disconnect() {
    this.disconnected = true;
  }
}

/** A supervisor over fake consumers whose starts fail as `failures` says (the first start always succeeds). */
async function supervise(failures: (startNumber: number) => Error | undefined) {
  const members: FakeConsumer[] = [];
  const started: number[] = [];
  const logs: string[] = [];
  const supervised = await startSupervisedConsumer({
    label: "group-a",
    logger: lineLogger((line) => logs.push(line)),
    initialDelayMs: 5,
    maxDelayMs: 20,
    create: () => {
      const consumer = new FakeConsumer();
      members.push(consumer);
      return consumer as unknown as Consumer;
    },
    start: async () => {
      const number = members.length;
      started.push(number);
      const failure = number === 1 ? undefined : failures(number);
      if (failure) throw failure;
    },
  });
  return { supervised, members, started, logs };
}

describe("a supervised Kafka consumer, replaced when kafkajs gives it up", () => {
  it("when kafkajs gives the consumer up and replacements fail at first, then new consumers are tried until one runs, and it is the consumer", async () => {
    const { supervised, members, logs } = await supervise((n) => (n < 4 ? new Error(`broker not ready (${n})`) : undefined));
    members[0]!.crash(false);
    await eventually(async () => logs, (lines) => lines.some((line) => line.includes("replaced and running")), { what: "a replacement that runs" });
    assert.equal(members.length, 4, "two failed replacements, then one that runs");
    assert.equal(supervised.consumer, members[3] as unknown as Consumer);
    assert.ok(members.slice(0, 3).every((m) => m.disconnected), "every consumer given up is disconnected");
    assert.equal(logs.filter((line) => line.includes("could not be replaced yet")).length, 2);
    await supervised.stop();
    assert.ok(members[3]!.disconnected);
  });

  it("when kafkajs restarts a crashed consumer itself, then it is not replaced", async () => {
    const { supervised, members, logs } = await supervise(() => undefined);
    members[0]!.crash(true);
    members[0]!.crash(false); // a later final crash of the same consumer is replaced, as the first
    await eventually(async () => logs, (lines) => lines.some((line) => line.includes("replaced and running")), { what: "a replacement that runs" });
    assert.equal(members.length, 2);
    assert.match(logs[0]!, /crashed \(kafkajs restarts it\)/);
    await supervised.stop();
  });

  it("when a replacement's start throws a TypeError, then it is tried again as any other error", async () => {
    const { supervised, members, logs } = await supervise((n) => (n === 2 ? new TypeError("Cannot read properties of undefined (reading 'partitions')") : undefined));
    members[0]!.crash(false);
    await eventually(async () => logs, (lines) => lines.some((line) => line.includes("replaced and running")), { what: "a replacement that runs" });
    assert.equal(members.length, 3);
    assert.ok(logs.some((line) => line.includes("could not be replaced yet: TypeError: Cannot read properties")), logs.join("\n"));
    await supervised.stop();
  });

  it("when it is stopped while replacements keep failing, then stop resolves, no consumer is created after it, and the current one is disconnected", async () => {
    const { supervised, members, started } = await supervise((n) => new Error(`broker down (${n})`));
    members[0]!.crash(false);
    await eventually(async () => started.length, (count) => count >= 3, { what: "two failed replacements" });
    await supervised.stop();
    const created = members.length;
    assert.ok(members.at(-1)!.disconnected);
    // A crash after stop() is not replaced.
    members.at(-1)!.crash(false);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(members.length, created);
  });
});
