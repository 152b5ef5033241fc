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
 * delay topic of the smallest tier >= delayMs (the largest tier when none is), with
 * headers naming the target topic and the due time. Each tier holds one fixed delay, so
 * within a partition messages are already in due order and the forwarder only has to
 * wait on the head: when the head is not due it pauses that topic-partition, seeks back
 * to the head's offset and resumes it when due. Other partitions and tiers keep flowing
 * (kafkajs fetches all partitions of a broker in one request loop, so blocking inside
 * eachMessage would stall every tier). A delay that is not a tier is delivered no earlier
 * than asked and at most that tier's delay late.
 *
 * Delivery is at-least-once: a subscriber's offset is committed only after its handler
 * returned; the forwarder commits a delay message only after the target topic acked it.
 * A handler that throws is reported and its event is re-published to the same topic
 * with the redelivery delay (default: the smallest tier), so one poison event cannot
 * block its partition.
 */
import kafkajs from "kafkajs";
import type { Consumer, EachMessagePayload, IHeaders, LogEntry } from "kafkajs";
import { TOPICS, type EventBus, type EventHandler, type PublishOptions, type Subscription, type Topic } from "../../ports/event-bus.js";
import { DependencyUnavailableError, type DependencyProbe } from "../../ports/dependency.js";
import { startSupervisedConsumer, type SupervisedConsumer } from "./supervised-consumer.js";
import { ensureTopics } from "./kafka-topics.js";
import type { Logger } from "../../ports/logger.js";
import { noTelemetry, type Telemetry } from "../../ports/telemetry.js";
import { consumeInSpan, injectTraceContext } from "../observability/tracing.js";
import type { ConsumerLag } from "../observability/prometheus-metrics.js";

const { Kafka, Partitioners, logLevel } = kafkajs;

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
}

export type KafkaEventBus = EventBus & {
  readonly topics: Record<string, string>;
  readonly probe: DependencyProbe;
  /** Lag of this process's consumer groups, per partition: the end offset minus the group's committed offset. */
  consumerLag(signal: AbortSignal): Promise<ConsumerLag[]>;
};

const HEADER_TARGET = "x-delay-target";
const HEADER_DUE = "x-delay-due-at";
const DELAY_TOPIC_PARTITIONS = 3;
const DAY_MS = 24 * 3600_000;
const DEFAULT_CLOSE_TIMEOUT_MS = 10_000;
const DEFAULT_PUBLISH_TIMEOUT_MS = 3_000;
const PROBE_TIMEOUT_MS = 2_000;

/*
 * Group timing. kafkajs heartbeats only from its fetch loop (and from our ticker while a
 * handler runs), and members learn about a rebalance from a heartbeat or the end of a
 * fetch long-poll. The defaults (session 30 s, heartbeat 3 s, fetch wait 5 s, rebalance
 * 60 s) make a join next to idle members take several seconds and a dead member go
 * unnoticed for 30 s. With a 1 s heartbeat and a 1 s fetch wait, idle members rejoin
 * within about a second; a 10 s session notices a killed worker quickly while leaving
 * room for event-loop stalls. The rebalance timeout bounds how long the coordinator
 * waits for a member busy in a handler to rejoin; 30 s covers our longest handlers
 * (a slow generation) so a busy member is not thrown out of the group.
 */
const CONSUMER_TIMING = {
  sessionTimeout: 10_000,
  heartbeatInterval: 1_000,
  rebalanceTimeout: 30_000,
  maxWaitTimeInMs: 1_000,
} as const;
/** The forwarder's fetch wait bounds how late a resumed delay partition is fetched again. */
const FORWARDER_MAX_WAIT_MS = 100;

/*
 * Retries for every client: the broker may still be electing leaders or loading the
 * group coordinator right after it (or a topic) was created; back off briefly and keep
 * trying for about half a minute instead of crashing.
 */
const RETRY = { initialRetryTime: 200, maxRetryTime: 5_000, retries: 12 } as const;

export async function createKafkaEventBus(options: KafkaEventBusOptions): Promise<KafkaEventBus> {
  const prefix = options.topicPrefix;
  const tiers = [...new Set(options.delayTiersMs.map((ms) => Math.round(ms)))].filter((ms) => ms > 0).sort((a, b) => a - b);
  if (tiers.length === 0) throw new Error("KafkaEventBus needs at least one delay tier (the smallest one is also the redelivery delay)");
  const partitions = options.partitions > 0 ? Math.floor(options.partitions) : 6;
  const logger = options.logger;
  const telemetry = options.telemetry ?? noTelemetry;
  const redeliveryDelayMs = options.redeliveryDelayMs !== undefined && options.redeliveryDelayMs > 0 ? options.redeliveryDelayMs : tiers[0]!;

  const topicName = (topic: string) => `${prefix}${topic}`;
  const delayTopicName = (tier: number) => `${prefix}delay.${tier}ms`;
  const delayTopics = new Map(tiers.map((tier) => [tier, delayTopicName(tier)]));
  const topics: Record<string, string> = {};
  for (const topic of Object.values(TOPICS)) topics[topic] = topicName(topic);
  for (const tier of tiers) topics[`delay.${tier}ms`] = delayTopicName(tier);

  const kafka = new Kafka({
    clientId: options.clientId,
    brokers: options.brokers,
    connectionTimeout: 3_000,
    retry: RETRY,
    logLevel: logLevel.WARN,
    logCreator: () => (entry: LogEntry) => forwardLog(entry, logger),
  });
  const publishTimeoutMs = options.publishTimeoutMs ?? DEFAULT_PUBLISH_TIMEOUT_MS;

  const admin = kafka.admin({ retry: RETRY });
  const producer = kafka.producer({
    // Not idempotent: kafkajs's idempotent producer assigns sequence numbers as sends are
    // queued, so sends that overlap an outage (timed out by publish(), still retried inside
    // kafkajs) leave it out of sequence with the broker after its return, and every later
    // send fails (tulios/kafkajs#598, #1005). Delivery is at-least-once and every handler
    // is idempotent, so a duplicate from a retried send is harmless.
    idempotent: false,
    maxInFlightRequests: 1,
    // A send gives up after a few seconds rather than piling up retries through an outage;
    // publish() bounds the caller's wait anyway.
    retry: { initialRetryTime: 200, maxRetryTime: 2_000, retries: 3 },
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner,
  });

  await admin.connect();
  try {
    await ensureTopics(admin, [
      { topic: topics[TOPICS.generationRequested]!, numPartitions: partitions },
      { topic: topics[TOPICS.jobFinished]!, numPartitions: partitions },
      { topic: topics[TOPICS.webhookDelivery]!, numPartitions: partitions },
      { topic: topics[TOPICS.webhookDeadLetter]!, numPartitions: 1, configEntries: [{ name: "retention.ms", value: "-1" }] },
      ...tiers.map((tier) => ({
        topic: delayTopicName(tier),
        numPartitions: DELAY_TOPIC_PARTITIONS,
        // A delayed message must outlive its delay by a wide margin.
        configEntries: [{ name: "retention.ms", value: String(Math.max(7 * DAY_MS, 3 * tier)) }],
      })),
    ], logger);
    await producer.connect();
  } catch (error) {
    await Promise.allSettled([producer.disconnect(), admin.disconnect()]);
    throw error;
  }

  const consumers = new Set<SupervisedConsumer>();
  const resumeTimers = new Set<NodeJS.Timeout>();
  let closed = false;
  let closing: Promise<void> | undefined;

  /** A consumer of the group, replaced whenever kafkajs gives it up (see supervised-consumer.ts). */
  async function runConsumer(groupId: string, maxWaitTimeInMs: number, start: (consumer: Consumer) => Promise<void>): Promise<SupervisedConsumer> {
    const supervised = await startSupervisedConsumer({
      label: groupId,
      logger,
      create: () => kafka.consumer({
        groupId,
        ...CONSUMER_TIMING,
        maxWaitTimeInMs,
        allowAutoTopicCreation: false,
        // Always come back after an outage: a consumer that gave up would leave its topic unread until a restart.
        retry: { ...RETRY, restartOnFailure: async () => true },
      }),
      start,
    });
    consumers.add(supervised);
    return supervised;
  }

  async function produce(topic: string, key: string, value: string | Buffer | null, headers?: IHeaders): Promise<void> {
    await producer.send({ topic, acks: -1, messages: [{ key, value, ...(headers ? { headers } : {}) }] });
  }

  /** Every message carries the trace context it was published in (traceparent), so its consumer continues that trace. */
  async function publishRaw(topic: string, key: string, value: string | Buffer | null, delayMs: number): Promise<void> {
    const trace = injectTraceContext({});
    if (!(delayMs > 0)) return produce(topic, key, value, trace);
    const tier = tiers.find((t) => t >= delayMs) ?? tiers[tiers.length - 1]!;
    await produce(delayTopics.get(tier)!, key, value, {
      ...trace,
      [HEADER_TARGET]: topic,
      [HEADER_DUE]: String(Date.now() + Math.ceil(delayMs)),
    });
  }

  // The forwarder: one group over all delay topics, committing by hand so that a
  // message is committed only once its target has it (and never by a pause/seek).
  async function forward(forwarder: Consumer, { topic, partition, message, pause }: EachMessagePayload): Promise<void> {
    const next = (BigInt(message.offset) + 1n).toString();
    const target = headerString(message.headers?.[HEADER_TARGET]);
    const due = Number(headerString(message.headers?.[HEADER_DUE]));
    if (!target || !Number.isFinite(due)) {
      logger.warn({ topic, partition, offset: message.offset }, "kafka delay forwarder: dropping a message without target/due headers");
      await forwarder.commitOffsets([{ topic, partition, offset: next }]);
      return;
    }
    const wait = due - Date.now();
    if (wait > 0) {
      // Not due: stop fetching this partition, rewind to this message, come back when due.
      const resume = pause();
      forwarder.seek({ topic, partition, offset: message.offset });
      const timer = setTimeout(() => {
        resumeTimers.delete(timer);
        if (!closed) resume();
      }, wait);
      resumeTimers.add(timer);
      return;
    }
    const { [HEADER_TARGET]: _target, [HEADER_DUE]: _due, ...carried } = message.headers ?? {};
    await produce(target, message.key?.toString() ?? "", message.value, carried);
    await forwarder.commitOffsets([{ topic, partition, offset: next }]);
  }

  try {
    await runConsumer(`${prefix}delay-forwarder`, FORWARDER_MAX_WAIT_MS, async (forwarder) => {
      await forwarder.connect();
      await forwarder.subscribe({ topics: [...delayTopics.values()], fromBeginning: true });
      await forwarder.run({
        autoCommit: false,
        partitionsConsumedConcurrently: tiers.length * DELAY_TOPIC_PARTITIONS,
        eachMessage: (payload) => forward(forwarder, payload),
      });
    });
  } catch (error) {
    await Promise.allSettled([producer.disconnect(), admin.disconnect()]);
    throw error;
  }

  async function disconnect(consumer: SupervisedConsumer): Promise<void> {
    consumers.delete(consumer);
    await consumer.stop();
  }

  // Readiness asks a client of its own that does not retry, so a probe answers within its bound.
  const prober = kafka.admin({ retry: { retries: 0 } });
  const probe: DependencyProbe = {
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

  /** The consumer groups this process runs, and their topics (for consumer lag). */
  const groups = new Map<string, string>();

  async function consumerLag(signal: AbortSignal): Promise<ConsumerLag[]> {
    const lags: ConsumerLag[] = [];
    for (const [group, topic] of groups) {
      if (signal.aborted) break;
      const [ends, committed] = await Promise.all([admin.fetchTopicOffsets(topic), admin.fetchOffsets({ groupId: group, topics: [topic] })]);
      const committedOf = new Map(committed.flatMap((t) => t.partitions).map((p) => [p.partition, BigInt(p.offset)]));
      for (const { partition, high, low } of ends) {
        // No commit yet (-1): the group reads from the beginning, so everything still held is lag.
        const done = committedOf.get(partition) ?? -1n;
        const from = done < 0n ? BigInt(low) : done;
        const lag = BigInt(high) - from;
        lags.push({ group, topic, partition, lag: Number(lag > 0n ? lag : 0n) });
      }
    }
    return lags;
  }

  const bus: KafkaEventBus = {
    topics,
    probe,
    consumerLag,

    async publish<T>(topic: Topic, key: string, event: T, publishOptions: PublishOptions = {}): Promise<void> {
      if (closed) throw new Error("event bus is closed");
      // Whatever kafkajs throws (a lost connection, retries exhausted) means "Kafka cannot take it now".
      const started = performance.now();
      const sent = publishRaw(topicName(topic), key, JSON.stringify(event) ?? "null", publishOptions.delayMs ?? 0).catch((error: unknown) => {
        throw new DependencyUnavailableError("kafka", `Kafka refused the event: ${describe(error)}`, { cause: error });
      });
      sent.catch(() => undefined); // a late failure after the bound below is nobody's to hear
      let taken: boolean;
      try {
        taken = await within(sent, publishTimeoutMs);
      } catch (error) {
        telemetry.observe({ kind: "bus_publish", topic, ok: false, seconds: (performance.now() - started) / 1000 });
        throw error;
      }
      telemetry.observe({ kind: "bus_publish", topic, ok: taken, seconds: (performance.now() - started) / 1000 });
      if (!taken) throw new DependencyUnavailableError("kafka", `Kafka did not take the event within ${publishTimeoutMs} ms`);
    },

    async subscribe<T>(topic: Topic, group: string, handler: EventHandler<T>): Promise<Subscription> {
      if (closed) throw new Error("event bus is closed");
      const kafkaTopic = topicName(topic);
      async function eachMessage({ message, heartbeat }: EachMessagePayload): Promise<void> {
        let event: T;
        try {
          event = JSON.parse(message.value?.toString() ?? "") as T;
        } catch (error) {
          // It will never parse: report it and move on rather than retry forever.
          options.onHandlerError?.(topic, error);
          logger.warn({ topic: kafkaTopic, offset: message.offset }, "kafka: skipping a message that is not JSON");
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
          await publishRaw(kafkaTopic, message.key?.toString() ?? "", message.value, redeliveryDelayMs);
        } finally {
          clearInterval(ticker);
        }
      }

      groups.set(`${prefix}${group}.${topic}`, kafkaTopic);
      const consumer = await runConsumer(`${prefix}${group}.${topic}`, CONSUMER_TIMING.maxWaitTimeInMs, async (member) => {
        await member.connect();
        await member.subscribe({ topics: [kafkaTopic], fromBeginning: true });
        // Resolves once the group is joined and partitions are assigned.
        await member.run({ partitionsConsumedConcurrently: partitions, eachMessage });
      });
      let closedOnce: Promise<void> | undefined;
      return { close: () => (closedOnce ??= disconnect(consumer)) };
    },

    close(): Promise<void> {
      closing ??= (async () => {
        closed = true;
        for (const timer of resumeTimers) clearTimeout(timer);
        resumeTimers.clear();
        const budget = options.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS;
        const deadline = Date.now() + budget;
        // Consumers first (their handlers may still publish), then the producer and admin,
        // which keep a fifth of the budget.
        const stopConsumers = Promise.allSettled([...consumers].map((consumer) => disconnect(consumer)));
        if (!(await within(stopConsumers, budget * 0.8))) {
          logger.warn("kafka event bus: consumers did not stop in time; closing the producer anyway");
        }
        const stopClients = Promise.allSettled([producer.disconnect(), admin.disconnect(), prober.disconnect()]);
        if (!(await within(stopClients, deadline - Date.now()))) logger.warn("kafka event bus: producer/admin did not disconnect in time");
      })();
      return closing;
    },
  };
  return bus;
}

/** True when the promise settled within ms. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, ms))));
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function headerString(value: Buffer | string | (Buffer | string)[] | undefined): string | undefined {
  const first = Array.isArray(value) ? value[0] : value;
  return first?.toString();
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/*
 * kafkajs's connection layer logs every error response at ERROR, including the ones the
 * caller retries as a matter of course while a new topic's metadata propagates. Those are
 * dropped; if they persist, the operation that needed the topic fails and says so.
 */
const TRANSIENT_RESPONSE_ERRORS =
  /does not host this topic-partition|no leader for this topic-partition|not the leader for that topic-partition|group is rebalancing|Topic creation errors/i;
/*
 * kafkajs warns when retries of an idempotent producer are limited; our producer is not
 * idempotent, but the pattern stays filtered in case a future option brings it back.
 */
const EXPECTED_WARNINGS = /^Limiting retries for the idempotent producer/;

/** During an outage kafkajs repeats the same complaint on every retry: one line per message per interval is enough. */
const REPEAT_INTERVAL_MS = 30_000;
const lastLogged = new Map<string, number>();

function forwardLog({ level, namespace, log: entry }: LogEntry, logger: Logger): void {
  const { message, timestamp: _timestamp, logger: _logger, ...extra } = entry as typeof entry & { logger?: unknown };
  if (namespace === "Connection" && message.startsWith("Response ") && TRANSIENT_RESPONSE_ERRORS.test(String(extra.error))) return;
  if (EXPECTED_WARNINGS.test(message)) return;
  const now = Date.now();
  const seen = `${namespace}:${message}`;
  if (now - (lastLogged.get(seen) ?? 0) < REPEAT_INTERVAL_MS) return;
  if (lastLogged.size > 1000) lastLogged.clear();
  lastLogged.set(seen, now);
  // kafkajs's errors are a broker or the network failing (readiness reports the outage): warnings, not our own errors.
  const facts = { kafkajs_level: level === logLevel.ERROR ? "error" : level === logLevel.WARN ? "warn" : "info", namespace, ...extra };
  if (level === logLevel.ERROR || level === logLevel.WARN) logger.warn(facts, `kafkajs: ${message}`);
  else logger.info(facts, `kafkajs: ${message}`);
}
