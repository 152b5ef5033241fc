/**
 * The job feed on Kafka: topic `<prefix>job.lifecycle` (keyed by job id,
 * kept one hour: nothing is replayed from it), read by every process through
 * a consumer group of its own (`<prefix>job-feed.<clientId>.<uuid>`, starting
 * at the end of the topic), so each process hears every signal, whichever
 * process published it. The group is deleted when the feed closes.
 */
import { randomUUID } from "node:crypto";
import kafkajs from "kafkajs";
import type { Consumer } from "kafkajs";
import type { JobFeed, JobSignal } from "../../ports/job-feed.js";
import { DependencyUnavailableError } from "../../ports/dependency.js";
import { startSupervisedConsumer, type SupervisedConsumer } from "./supervised-consumer.js";
import { ensureTopics, withReplication, type TopicReplication } from "./kafka-topics.js";
import { CONSUMER_TIMING, retryOf, sessionTimeoutOf, type KafkaTiming } from "./kafka-connection.js";
import type { Logger } from "../../ports/logger.js";

const { Kafka, Partitioners, logLevel } = kafkajs;

export interface KafkaJobFeedOptions {
  readonly brokers: string[];
  readonly clientId: string;
  readonly topicPrefix: string;
  readonly partitions: number;
  /** Upper bound of one publish (default 3 s). */
  readonly publishTimeoutMs?: number;
  /** The retries and session timeout of the event bus's clients (KAFKA_RETRIES, KAFKA_SESSION_TIMEOUT); defaults when left out. */
  readonly timing?: KafkaTiming;
  /** The lifecycle topic's replication (KAFKA_REPLICATION_FACTOR, KAFKA_MIN_INSYNC_REPLICAS); left out, the broker's defaults. */
  readonly replication?: TopicReplication;
  readonly logger: Logger;
}

export const JOB_LIFECYCLE_TOPIC = "job.lifecycle";
const RETENTION_MS = 3600_000;
const JOIN_TIMEOUT_MS = 30_000;

export async function createKafkaJobFeed(options: KafkaJobFeedOptions): Promise<JobFeed> {
  const topic = `${options.topicPrefix}${JOB_LIFECYCLE_TOPIC}`;
  const groupId = `${options.topicPrefix}job-feed.${options.clientId}.${randomUUID()}`;
  const retry = retryOf(options.timing ?? {});
  const kafka = new Kafka({
    clientId: `${options.clientId}-feed`, brokers: options.brokers, connectionTimeout: 3_000, retry, logLevel: logLevel.ERROR,
    logCreator: () => ({ log }) => options.logger.warn({ namespace: "job feed" }, `kafkajs: ${log.message}`),
  });
  const admin = kafka.admin({ retry });
  const producer = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 3 }, createPartitioner: Partitioners.DefaultPartitioner });
  const newConsumer = (): Consumer => kafka.consumer({
    groupId, sessionTimeout: sessionTimeoutOf(options.timing ?? {}), heartbeatInterval: CONSUMER_TIMING.heartbeatInterval, maxWaitTimeInMs: 100,
    allowAutoTopicCreation: false, retry: { ...retry, restartOnFailure: async () => true },
  });
  let consumer: SupervisedConsumer | undefined;
  const listeners = new Set<(signal: JobSignal) => void>();
  const publishTimeoutMs = options.publishTimeoutMs ?? 3_000;

  /** Runs a member of the group; resolves once it holds its partitions, so signals published after that are heard. */
  async function listen(member: Consumer): Promise<void> {
    const joined = new Promise<void>((resolve) => member.on(member.events.GROUP_JOIN, () => resolve()));
    await member.connect();
    await member.subscribe({ topics: [topic], fromBeginning: false });
    await member.run({
      // Nothing to remember: the group is this process's alone and always starts at the end of the topic.
      autoCommit: false,
      eachMessage: async ({ message }) => {
        let signal: JobSignal;
        try {
          signal = JSON.parse(message.value?.toString() ?? "") as JobSignal;
        } catch {
          return; // not ours to repeat
        }
        for (const listener of [...listeners]) {
          try {
            listener(signal);
          } catch {
            // a listener's failure is its own
          }
        }
      },
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("the job feed's consumer did not join its group within 30 s")), JOIN_TIMEOUT_MS)));
    try {
      await Promise.race([joined, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  try {
    await admin.connect();
    await ensureTopics(admin, withReplication([
      { topic, numPartitions: options.partitions, configEntries: [{ name: "retention.ms", value: String(RETENTION_MS) }] },
    ], options.replication), options.logger);
    await producer.connect();
    consumer = await startSupervisedConsumer({ label: groupId, logger: options.logger, create: newConsumer, start: listen });
  } catch (error) {
    await Promise.allSettled([producer.disconnect(), admin.disconnect()]);
    throw error;
  }

  let closing: Promise<void> | undefined;
  return {
    async publish(signal: JobSignal): Promise<void> {
      if (closing) return;
      const sent = producer.send({ topic, acks: 1, messages: [{ key: signal.jobId, value: JSON.stringify(signal) }] });
      sent.catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new DependencyUnavailableError("kafka", `Kafka did not take the job signal within ${publishTimeoutMs} ms`)), publishTimeoutMs);
      });
      try {
        await Promise.race([sent, late]);
      } finally {
        clearTimeout(timer);
      }
    },
    listen(handler) {
      listeners.add(handler);
      return () => void listeners.delete(handler);
    },
    close() {
      closing ??= (async () => {
        listeners.clear();
        await Promise.allSettled([consumer!.stop(), producer.disconnect()]);
        // The group was this process's alone: leave nothing behind in the cluster.
        await admin.deleteGroups([groupId]).catch(() => undefined);
        await admin.disconnect().catch(() => undefined);
      })();
      return closing;
    },
  };
}
