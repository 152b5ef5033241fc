import type { Consumer, EachMessagePayload } from "kafkajs";
import { injectTraceContext } from "../observability/tracing.js";
import { produce, runConsumer, type KafkaBusContext } from "./kafka-connection.js";

/*
 * Delays: Kafka has no per-message delay, so a publish with `delayMs` writes to the
 * delay topic of the smallest tier >= delayMs (the largest tier when none is), with
 * headers naming the target topic and the due time. Each tier holds one fixed delay, so
 * within a partition messages are already in due order and the forwarder only has to
 * wait on the head (see forward).
 */

const HEADER_TARGET = "x-delay-target";
const HEADER_DUE = "x-delay-due-at";
export const DELAY_TOPIC_PARTITIONS = 3;
/** The forwarder's fetch wait bounds how late a resumed delay partition is fetched again. */
const FORWARDER_MAX_WAIT_MS = 100;

/**
 * Publishes to `topic`, or through the delay tier for `delayMs`. Every message carries
 * the trace context it was published in (traceparent), so its consumer continues that trace.
 */
export async function publishRaw(bus: KafkaBusContext, topic: string, key: string, value: string | Buffer | null, delayMs: number): Promise<void> {
  const trace = injectTraceContext({});
  if (!(delayMs > 0)) return produce(bus, topic, key, value, trace);
  const tier = bus.tiers.find((t) => t >= delayMs) ?? bus.tiers[bus.tiers.length - 1]!;
  await produce(bus, bus.delayTopics.get(tier)!, key, value, {
    ...trace,
    [HEADER_TARGET]: topic,
    [HEADER_DUE]: String(Date.now() + Math.ceil(delayMs)),
  });
}

/**
 * The forwarder: one group over all delay topics, committing by hand so that a
 * message is committed only once its target has it (and never by a pause/seek).
 */
export function startDelayForwarder(bus: KafkaBusContext) {
  return runConsumer(bus, `${bus.prefix}delay-forwarder`, FORWARDER_MAX_WAIT_MS, async (forwarder) => {
    await forwarder.connect();
    await forwarder.subscribe({ topics: [...bus.delayTopics.values()], fromBeginning: true });
    await forwarder.run({
      autoCommit: false,
      partitionsConsumedConcurrently: bus.tiers.length * DELAY_TOPIC_PARTITIONS,
      eachMessage: (payload) => forward(bus, forwarder, payload),
    });
  });
}

/**
 * Moves a due message to its target. When the head of a partition is not due it pauses
 * that topic-partition, seeks back to the head's offset and resumes it when due. Other
 * partitions and tiers keep flowing (kafkajs fetches all partitions of a broker in one
 * request loop, so blocking inside eachMessage would stall every tier). A delay that is
 * not a tier is delivered no earlier than asked and at most that tier's delay late.
 */
async function forward(bus: KafkaBusContext, forwarder: Consumer, { topic, partition, message, pause }: EachMessagePayload): Promise<void> {
  const next = (BigInt(message.offset) + 1n).toString();
  const target = headerString(message.headers?.[HEADER_TARGET]);
  const due = Number(headerString(message.headers?.[HEADER_DUE]));
  if (!target || !Number.isFinite(due)) {
    bus.logger.warn({ topic, partition, offset: message.offset }, "kafka delay forwarder: dropping a message without target/due headers");
    await forwarder.commitOffsets([{ topic, partition, offset: next }]);
    return;
  }
  const wait = due - Date.now();
  if (wait > 0) {
    // Not due: stop fetching this partition, rewind to this message, come back when due.
    const resume = pause();
    forwarder.seek({ topic, partition, offset: message.offset });
    const timer = setTimeout(() => {
      bus.resumeTimers.delete(timer);
      if (!bus.state.closed) resume();
    }, wait);
    bus.resumeTimers.add(timer);
    return;
  }
  const { [HEADER_TARGET]: _target, [HEADER_DUE]: _due, ...carried } = message.headers ?? {};
  await produce(bus, target, message.key?.toString() ?? "", message.value, carried);
  await forwarder.commitOffsets([{ topic, partition, offset: next }]);
}

function headerString(value: Buffer | string | (Buffer | string)[] | undefined): string | undefined {
  const first = Array.isArray(value) ? value[0] : value;
  return first?.toString();
}
