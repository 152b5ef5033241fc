import kafkajs from "kafkajs";
import type { Consumer, IHeaders, Kafka as KafkaClient, LogEntry, Producer, RetryOptions } from "kafkajs";
import type { Logger } from "../../ports/logger.js";
import { startSupervisedConsumer, type SupervisedConsumer } from "./supervised-consumer.js";

const { Kafka, Partitioners, logLevel } = kafkajs;

/*
 * Group timing. kafkajs heartbeats only from its fetch loop (and from our ticker while a
 * handler runs), and members learn about a rebalance from a heartbeat or the end of a
 * fetch long-poll. The defaults (session 30 s, heartbeat 3 s, fetch wait 5 s, rebalance
 * 60 s) make a join next to idle members take several seconds and a dead member go
 * unnoticed for 30 s. With a 1 s heartbeat and a 1 s fetch wait, idle members rejoin
 * within about a second; a 10 s session (KAFKA_SESSION_TIMEOUT's default) notices a killed
 * worker quickly while leaving room for event-loop stalls. The rebalance timeout bounds how
 * long the coordinator waits for a member busy in a handler to rejoin; 30 s covers our
 * longest handlers (a slow generation) so a busy member is not thrown out of the group.
 */
export const CONSUMER_TIMING = {
  heartbeatInterval: 1_000,
  rebalanceTimeout: 30_000,
  maxWaitTimeInMs: 1_000,
} as const;

/** The client timings an operator sets (KAFKA_SESSION_TIMEOUT, KAFKA_RETRIES); each one left out keeps its default. */
export interface KafkaTiming {
  /** A group member not heard from this long is dropped and its partitions go to the others (kafkajs's sessionTimeout). */
  readonly sessionTimeoutMs?: number;
  /** Retries of one client operation before it fails; a consumer that fails is started again (kafkajs's retry.retries). */
  readonly retries?: number;
}

/** kafkajs's `acks`: -1 waits for every in-sync replica, 1 for the partition's leader alone. */
export type ProducerAcks = -1 | 1;

export const DEFAULT_SESSION_TIMEOUT_MS = 10_000;
export const DEFAULT_RETRIES = 12;

/*
 * Retries for every client: the broker may still be electing leaders or loading the
 * group coordinator right after it (or a topic) was created; back off briefly and keep
 * trying (12 retries: about 40 s) instead of crashing.
 */
export function retryOf(timing: KafkaTiming): RetryOptions {
  return { initialRetryTime: 200, maxRetryTime: 5_000, retries: timing.retries ?? DEFAULT_RETRIES };
}

/** The session timeout of every consumer group member. */
export function sessionTimeoutOf(timing: KafkaTiming): number {
  return timing.sessionTimeoutMs ?? DEFAULT_SESSION_TIMEOUT_MS;
}

/** What the bus's units share: its clients, names, and what close() must stop. */
export interface KafkaBusContext {
  readonly kafka: KafkaClient;
  readonly producer: Producer;
  /** Prepended to every topic and consumer group name. */
  readonly prefix: string;
  readonly logger: Logger;
  /** Every client's retries and every consumer's session timeout. */
  readonly timing: KafkaTiming;
  /** The acknowledgement every publish waits for: -1 every in-sync replica (KAFKA_ACKS=all), 1 the partition's leader. */
  readonly acks: ProducerAcks;
  /** The delay tiers in ms, ascending, and each one's topic. */
  readonly tiers: readonly number[];
  readonly delayTopics: ReadonlyMap<number, string>;
  /** The consumers running (each replaced whenever kafkajs gives it up). */
  readonly consumers: Set<SupervisedConsumer>;
  /** Timers that resume a delay partition when its head is due. */
  readonly resumeTimers: Set<NodeJS.Timeout>;
  readonly state: { closed: boolean };
}

/** The client, its log forwarded to ours (kafkajs's errors and warnings as warnings: an outage is not our bug). */
export function createKafkaClient(brokers: string[], clientId: string, logger: Logger, timing: KafkaTiming): KafkaClient {
  return new Kafka({
    clientId,
    brokers,
    connectionTimeout: 3_000,
    retry: retryOf(timing),
    logLevel: logLevel.WARN,
    logCreator: () => (entry: LogEntry) => forwardLog(entry, logger),
  });
}

export function createProducer(kafka: KafkaClient): Producer {
  return kafka.producer({
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
}

/** A consumer of the group, replaced whenever kafkajs gives it up (see supervised-consumer.ts). */
export async function runConsumer(
  bus: KafkaBusContext, groupId: string, maxWaitTimeInMs: number, start: (consumer: Consumer) => Promise<void>,
): Promise<SupervisedConsumer> {
  const supervised = await startSupervisedConsumer({
    label: groupId,
    logger: bus.logger,
    create: () => bus.kafka.consumer({
      groupId,
      ...CONSUMER_TIMING,
      sessionTimeout: sessionTimeoutOf(bus.timing),
      maxWaitTimeInMs,
      allowAutoTopicCreation: false,
      // Always come back after an outage: a consumer that gave up would leave its topic unread until a restart.
      retry: { ...retryOf(bus.timing), restartOnFailure: async () => true },
    }),
    start,
  });
  bus.consumers.add(supervised);
  return supervised;
}

export async function stopConsumer(bus: KafkaBusContext, consumer: SupervisedConsumer): Promise<void> {
  bus.consumers.delete(consumer);
  await consumer.stop();
}

export async function produce(bus: KafkaBusContext, topic: string, key: string, value: string | Buffer | null, headers?: IHeaders): Promise<void> {
  await bus.producer.send({ topic, acks: bus.acks, messages: [{ key, value, ...(headers ? { headers } : {}) }] });
}

/** True when the promise settled within ms. */
export async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, ms))));
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function describe(error: unknown): string {
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
