import type { EachMessagePayload } from "kafkajs";
import type { EventHandler, Subscription, Topic } from "../../ports/event-bus.js";
import { consumeInSpan } from "../observability/tracing.js";
import { publishRaw } from "./delayed-delivery.js";
import { CONSUMER_TIMING, runConsumer, stopConsumer, type KafkaBusContext } from "./kafka-connection.js";

/** How a subscription handles its messages. */
export interface SubscribeOptions {
  /** Partitions of the main topics: a subscriber consumes them all concurrently. */
  readonly partitions: number;
  /** Delay before a handler that threw sees its event again. */
  readonly redeliveryDelayMs: number;
  readonly onHandlerError?: (topic: string, error: unknown) => void;
}

/**
 * EventBus.subscribe on Kafka: a consumer group `<prefix><group>.<topic>`. Delivery is
 * at-least-once: the offset is committed only after the handler returned. A handler
 * that throws is reported and its event re-published to the same topic with the
 * redelivery delay, so one poison event cannot block its partition. `groups` learns the
 * group and its topic (for consumer lag).
 */
export async function subscribeTo<T>(
  bus: KafkaBusContext, options: SubscribeOptions, groups: Map<string, string>, topic: Topic, group: string, handler: EventHandler<T>,
): Promise<Subscription> {
  if (bus.state.closed) throw new Error("event bus is closed");
  const kafkaTopic = `${bus.prefix}${topic}`;
  const groupId = `${bus.prefix}${group}.${topic}`;
  const eachMessage = (payload: EachMessagePayload) => handleMessage(bus, options, { topic, kafkaTopic, group }, handler, payload);
  groups.set(groupId, kafkaTopic);
  const consumer = await runConsumer(bus, groupId, CONSUMER_TIMING.maxWaitTimeInMs, async (member) => {
    await member.connect();
    await member.subscribe({ topics: [kafkaTopic], fromBeginning: true });
    // Resolves once the group is joined and partitions are assigned.
    await member.run({ partitionsConsumedConcurrently: options.partitions, eachMessage });
  });
  let closedOnce: Promise<void> | undefined;
  return { close: () => (closedOnce ??= stopConsumer(bus, consumer)) };
}

/** One message to a subscriber's handler, in a span of the trace it was published in. */
async function handleMessage<T>(
  bus: KafkaBusContext, options: SubscribeOptions, names: { topic: Topic; kafkaTopic: string; group: string }, handler: EventHandler<T>,
  { message, heartbeat }: EachMessagePayload,
): Promise<void> {
  const { topic, kafkaTopic, group } = names;
  let event: T;
  try {
    event = JSON.parse(message.value?.toString() ?? "") as T;
  } catch (error) {
    // It will never parse: report it and move on rather than retry forever.
    options.onHandlerError?.(topic, error);
    bus.logger.warn({ topic: kafkaTopic, offset: message.offset }, "kafka: skipping a message that is not JSON");
    return;
  }
  // Keep the session alive through long handlers (kafkajs heartbeats only between
  // messages); a rebalance error here is picked up by kafkajs after we return.
  const ticker = setInterval(() => void heartbeat().catch(() => undefined), CONSUMER_TIMING.heartbeatInterval);
  try {
    await consumeInSpan(`${topic} process`, message.headers ?? {}, { "messaging.system": "kafka", "messaging.destination.name": kafkaTopic, "messaging.consumer.group.name": group }, () => handler(event));
  } catch (error) {
    options.onHandlerError?.(topic, error);
    // Try again later without holding up the partition. If this publish fails the
    // error propagates, the offset stays uncommitted and kafkajs redelivers.
    await publishRaw(bus, kafkaTopic, message.key?.toString() ?? "", message.value, options.redeliveryDelayMs);
  } finally {
    clearInterval(ticker);
  }
}
