/**
 * The event bus on Apache Kafka (kafkajs 2.2.4 against Kafka 3.9, KRaft).
 *
 * Topics (created idempotently at start, before any consumer subscribes; every name
 * carries `topicPrefix`, "" in production):
 *
 * | topic                          | partitions      | key    | holds                                              |
 * | ------------------------------ | --------------- | ------ | -------------------------------------------------- |
 * | generation.requested           | `partitions` (6)| job id | a job waiting for a generation worker              |
 * | job.finished                   | `partitions` (6)| job id | a job reached done/failed (webhook dispatchers)    |
 * | webhook.delivery               | `partitions` (6)| job id | a webhook attempt that is due                      |
 * | webhook.dead-letter            | 1               | job id | deliveries that exhausted their retries; kept      |
 * |                                |                 |        | forever (retention.ms = -1) so they stay visible   |
 * | delay.<tier>ms, one per tier   | 3               | job id | events published with `delayMs`, waiting until due |
 *
 * Consumer groups:
 * - `<prefix><group>.<topic>` for every `subscribe(topic, group)`. The port's group is
 *   per topic (the embedded bus keeps one group map per topic, and the runtime uses the
 *   group "webhook-dispatchers" on two topics). In Kafka a group id spans topics, and
 *   kafkajs's round-robin assigner hands out only the leader's own topics to every member,
 *   so two consumers sharing one group id on different topics would starve one topic.
 *   Hence the topic suffix.
 * - `<prefix>delay-forwarder`: moves due messages from the delay topics to their targets.
 *
 * Delays: Kafka has no per-message delay, so `publish(..., { delayMs })` writes to the
 * delay topic of a tier, and the forwarder moves it to its target when due
 * (delayed-delivery.ts).
 *
 * Delivery is at-least-once: a subscriber's offset is committed only after its handler
 * returned; the forwarder commits a delay message only after the target topic acked it.
 * A handler that throws is reported and its event is re-published to the same topic
 * with the redelivery delay (default: the smallest tier), so one poison event cannot
 * block its partition (kafka-subscribe.ts).
 *
 * The units: the clients and what they share (kafka-connection.ts), publishing
 * (kafka-publish.ts), subscribing (kafka-subscribe.ts), delays (delayed-delivery.ts),
 * consumer lag (consumer-lag.ts); this file opens and closes them.
 */
import type { Admin, ITopicConfig } from "kafkajs";
import { TOPICS, type EventBus, type EventHandler, type PublishOptions, type Subscription, type Topic } from "../../ports/event-bus.js";
import type { DependencyProbe } from "../../ports/dependency.js";
import { ensureTopics, withReplication, type TopicReplication } from "./kafka-topics.js";
import type { Logger } from "../../ports/logger.js";
import { noTelemetry, type Telemetry } from "../../ports/telemetry.js";
import type { ConsumerLag } from "../observability/prometheus-metrics.js";
import { consumerLag } from "./consumer-lag.js";
import { DELAY_TOPIC_PARTITIONS, startDelayForwarder } from "./delayed-delivery.js";
import {
  createKafkaClient, createProducer, retryOf, stopConsumer, within, type KafkaBusContext, type KafkaTiming, type ProducerAcks,
} from "./kafka-connection.js";
import { publishEvent } from "./kafka-publish.js";
import { subscribeTo } from "./kafka-subscribe.js";

export interface KafkaEventBusOptions {
  brokers: string[];
  clientId: string;
  /** Prepended to every topic and consumer group name ("" in production). */
  topicPrefix: string;
  /** Partitions of the main topics (generation.requested, job.finished, webhook.delivery); default 6. */
  partitions: number;
  /**
   * Delays `publish({ delayMs })` must support, one delay topic each. Redeliveries after
   * a handler throws go through a tier too, so callers should include a short tier of
   * about 1000 ms next to e.g. the webhook retry schedule.
   */
  delayTiersMs: readonly number[];
  /**
   * Delay before a handler that threw sees its event again, rounded up to a tier like
   * any delay. Default: the smallest tier.
   */
  redeliveryDelayMs?: number;
  onHandlerError?: (topic: string, error: unknown) => void;
  /** Where the bus and kafkajs report (kafkajs's errors and warnings as warnings: an outage is not our bug). */
  logger: Logger;
  /** Publish latency and failures. */
  telemetry?: Telemetry;
  /** Upper bound for close(); default 10 s. Handlers still running then are abandoned. */
  closeTimeoutMs?: number;
  /**
   * Upper bound of one publish (default 3 s). Past it, publish() fails with
   * DependencyUnavailableError and the caller decides (announce later, answer
   * 503); kafkajs may still deliver it, which at-least-once allows.
   */
  publishTimeoutMs?: number;
  /** Every client's retries and every consumer's session timeout (KAFKA_RETRIES, KAFKA_SESSION_TIMEOUT); defaults when left out. */
  timing?: KafkaTiming;
  /** The replication of the topics created (KAFKA_REPLICATION_FACTOR, KAFKA_MIN_INSYNC_REPLICAS); left out, the broker's defaults. */
  replication?: TopicReplication;
  /** What a publish waits for (KAFKA_ACKS): -1, every in-sync replica (the default), or 1, the leader alone. */
  acks?: ProducerAcks;
}

export type KafkaEventBus = EventBus & {
  readonly topics: Record<string, string>;
  readonly probe: DependencyProbe;
  /** Lag of this process's consumer groups, per partition: the end offset minus the group's committed offset. */
  consumerLag(signal: AbortSignal): Promise<ConsumerLag[]>;
};

const DAY_MS = 24 * 3600_000;
const DEFAULT_CLOSE_TIMEOUT_MS = 10_000;
const DEFAULT_PUBLISH_TIMEOUT_MS = 3_000;
const PROBE_TIMEOUT_MS = 2_000;

export async function createKafkaEventBus(options: KafkaEventBusOptions): Promise<KafkaEventBus> {
  const prefix = options.topicPrefix;
  const tiers = [...new Set(options.delayTiersMs.map((ms) => Math.round(ms)))].filter((ms) => ms > 0).sort((a, b) => a - b);
  if (tiers.length === 0) throw new Error("KafkaEventBus needs at least one delay tier (the smallest one is also the redelivery delay)");
  const partitions = options.partitions > 0 ? Math.floor(options.partitions) : 6;
  const telemetry = options.telemetry ?? noTelemetry;
  const redeliveryDelayMs = options.redeliveryDelayMs !== undefined && options.redeliveryDelayMs > 0 ? options.redeliveryDelayMs : tiers[0]!;
  const publishTimeoutMs = options.publishTimeoutMs ?? DEFAULT_PUBLISH_TIMEOUT_MS;

  const delayTopics = new Map(tiers.map((tier) => [tier, `${prefix}delay.${tier}ms`]));
  const topics: Record<string, string> = {};
  for (const topic of Object.values(TOPICS)) topics[topic] = `${prefix}${topic}`;
  for (const tier of tiers) topics[`delay.${tier}ms`] = delayTopics.get(tier)!;

  const timing = options.timing ?? {};
  const kafka = createKafkaClient(options.brokers, options.clientId, options.logger, timing);
  const admin = kafka.admin({ retry: retryOf(timing) });
  const producer = createProducer(kafka);
  const bus: KafkaBusContext = {
    kafka, producer, prefix, logger: options.logger, timing, acks: options.acks ?? -1, tiers, delayTopics,
    consumers: new Set(), resumeTimers: new Set(), state: { closed: false },
  };
  try {
    await admin.connect();
    await ensureTopics(admin, withReplication(busTopics(topics, partitions, delayTopics), options.replication), options.logger);
    await producer.connect();
    await startDelayForwarder(bus);
  } catch (error) {
    await Promise.allSettled([producer.disconnect(), admin.disconnect()]);
    throw error;
  }

  // Readiness asks a client of its own that does not retry, so a probe answers within its bound.
  const prober = kafka.admin({ retry: { retries: 0 } });
  /** The consumer groups this process runs, and their topics (for consumer lag). */
  const groups = new Map<string, string>();
  const subscribing = { partitions, redeliveryDelayMs, onHandlerError: options.onHandlerError };
  let closing: Promise<void> | undefined;

  return {
    topics,
    probe: probeOf(prober),
    consumerLag: (signal) => consumerLag(admin, groups, signal),
    publish: <T>(topic: Topic, key: string, event: T, publishOptions: PublishOptions = {}) =>
      publishEvent(bus, telemetry, publishTimeoutMs, topic, key, event, publishOptions),
    subscribe: <T>(topic: Topic, group: string, handler: EventHandler<T>): Promise<Subscription> => subscribeTo(bus, subscribing, groups, topic, group, handler),
    close: () => (closing ??= close(bus, [admin, prober], options.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS)),
  };
}

/** The bus's topics as created (idempotently, before any consumer subscribes). */
export function busTopics(topics: Record<string, string>, partitions: number, delayTopics: ReadonlyMap<number, string>): ITopicConfig[] {
  return [
    { topic: topics[TOPICS.generationRequested]!, numPartitions: partitions },
    { topic: topics[TOPICS.jobFinished]!, numPartitions: partitions },
    { topic: topics[TOPICS.webhookDelivery]!, numPartitions: partitions },
    { topic: topics[TOPICS.webhookDeadLetter]!, numPartitions: 1, configEntries: [{ name: "retention.ms", value: "-1" }] },
    ...[...delayTopics].map(([tier, topic]) => ({
      topic,
      numPartitions: DELAY_TOPIC_PARTITIONS,
      // A delayed message must outlive its delay by a wide margin.
      configEntries: [{ name: "retention.ms", value: String(Math.max(7 * DAY_MS, 3 * tier)) }],
    })),
  ];
}

/** Readiness: the cluster answers with its brokers within PROBE_TIMEOUT_MS. */
function probeOf(prober: Admin): DependencyProbe {
  return {
    name: "kafka",
    async check() {
      const answered = prober.connect().then(() => prober.describeCluster()).then((cluster) => {
        if (cluster.brokers.length === 0) throw new Error("no brokers");
      });
      answered.catch(() => undefined);
      if (!(await within(answered, PROBE_TIMEOUT_MS))) throw new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`);
      await answered;
    },
  };
}

/**
 * Closes within `budget` ms: consumers first (their handlers may still publish), then
 * the producer and the admin clients, which keep a fifth of the budget. Handlers still
 * running then are abandoned.
 */
async function close(bus: KafkaBusContext, admins: readonly Admin[], budget: number): Promise<void> {
  bus.state.closed = true;
  for (const timer of bus.resumeTimers) clearTimeout(timer);
  bus.resumeTimers.clear();
  const deadline = Date.now() + budget;
  const stopConsumers = Promise.allSettled([...bus.consumers].map((consumer) => stopConsumer(bus, consumer)));
  if (!(await within(stopConsumers, budget * 0.8))) {
    bus.logger.warn("kafka event bus: consumers did not stop in time; closing the producer anyway");
  }
  const stopClients = Promise.allSettled([bus.producer.disconnect(), ...admins.map((admin) => admin.disconnect())]);
  if (!(await within(stopClients, deadline - Date.now()))) bus.logger.warn("kafka event bus: producer/admin did not disconnect in time");
}
