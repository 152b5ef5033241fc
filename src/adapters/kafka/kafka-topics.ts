/**
 * Topic creation shared by the event bus and the job feed: creating topics
 * on a KRaft broker and waiting until they can be written to.
 */
import type { Admin, ITopicConfig } from "kafkajs";
import pRetry from "p-retry";
import type { Logger } from "../../ports/logger.js";
import { retryingEveryError } from "../../shared/every-error.js";

/** How the topics the service creates are replicated (KAFKA_REPLICATION_FACTOR, KAFKA_MIN_INSYNC_REPLICAS). */
export interface TopicReplication {
  /** Copies of each partition, on as many brokers. */
  readonly factor: number;
  /** In-sync copies an `acks=all` write needs before it is acknowledged (the topic's `min.insync.replicas`). */
  readonly minInsyncReplicas: number;
}

/** The topics with their replication: a factor and `min.insync.replicas` each; left out, the broker's defaults hold. */
export function withReplication(topics: readonly ITopicConfig[], replication: TopicReplication | undefined): ITopicConfig[] {
  if (!replication) return [...topics];
  return topics.map((topic) => ({
    ...topic,
    replicationFactor: replication.factor,
    configEntries: [
      ...(topic.configEntries ?? []).filter((entry) => entry.name !== "min.insync.replicas"),
      { name: "min.insync.replicas", value: String(replication.minInsyncReplicas) },
    ],
  }));
}

/** Creates the topics that are missing and waits until every partition has a leader. */
export async function ensureTopics(admin: Admin, wanted: ITopicConfig[], logger: Logger): Promise<void> {
  // createTopics answers false, without waiting for leaders, when some already exist
  // (another process won the race), and its wait for leaders retries only on
  // LEADER_NOT_AVAILABLE while a KRaft broker answers UNKNOWN_TOPIC_OR_PARTITION until
  // it has applied the new topic's metadata. So the topics are created here and their
  // leaders awaited separately below.
  try {
    await admin.createTopics({ topics: wanted, waitForLeaders: true, timeout: 30_000 });
  } catch (error) {
    // A refusal per topic comes as kafkajs's aggregate of them, each with its protocol error's type.
    const types = [error, ...((error as { errors?: unknown[] }).errors ?? [])].map((e) => (e as { type?: string }).type);
    if (types.includes("INVALID_REPLICATION_FACTOR")) throw tooFewBrokers(wanted, error);
    if ((error as { type?: string }).type !== "UNKNOWN_TOPIC_OR_PARTITION") throw error;
  }
  const names = wanted.map((t) => t.topic);
  // Asked every 100 ms for 30 s; the error of the last try (a broker's, or "no leaders") is the one thrown.
  const topics = await pRetry(
    retryingEveryError(async () => {
      const { topics } = await admin.fetchTopicMetadata({ topics: names });
      const ready = topics.length === names.length && topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0));
      if (!ready) throw new Error(`kafka topics have no leaders after 30 s: ${names.join(", ")}`);
      return topics;
    }),
    { retries: Infinity, minTimeout: 100, factor: 1, maxRetryTime: 30_000 },
  );
  for (const t of wanted) {
    const actual = topics.find((m) => m.name === t.topic)?.partitions.length;
    if (t.numPartitions !== undefined && actual !== t.numPartitions) {
      logger.warn({ topic: t.topic, partitions: actual, configured: t.numPartitions }, "kafka topic has another partition count than configured; leaving it as is");
    }
  }
}

/** The broker's refusal of a replication factor above its broker count, saying which setting to change. */
function tooFewBrokers(wanted: readonly ITopicConfig[], cause: unknown): Error {
  const factor = Math.max(...wanted.map((topic) => topic.replicationFactor ?? 0));
  return new Error(
    `Kafka refused topics of replication factor ${factor} (KAFKA_REPLICATION_FACTOR): the cluster has fewer brokers; ` +
      "a single-broker development cluster takes KAFKA_REPLICATION_FACTOR=1 and KAFKA_MIN_INSYNC_REPLICAS=1",
    { cause },
  );
}
