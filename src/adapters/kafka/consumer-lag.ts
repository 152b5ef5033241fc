import type { Admin } from "kafkajs";
import type { ConsumerLag } from "../observability/prometheus-metrics.js";

/** Lag of the given consumer groups (group → topic), per partition: the end offset minus the group's committed offset. */
export async function consumerLag(admin: Admin, groups: ReadonlyMap<string, string>, signal: AbortSignal): Promise<ConsumerLag[]> {
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
