import type { BlobStore } from "../../ports/blob-store.js";
import type { Clock } from "../../ports/clock.js";
import type { IdempotencyStore } from "../../ports/idempotency-store.js";
import type { JobStore } from "../../ports/job-store.js";

export interface RetentionPorts {
  readonly jobs: JobStore;
  readonly idempotency: IdempotencyStore;
  readonly blobs: BlobStore;
  readonly clock: Clock;
}

const PAGE = 1000;

/**
 * JOB_RETENTION: finished jobs, their deliveries and their files are removed
 * once they are older than the retention, and expired idempotency keys with
 * them, so storage does not grow without bound. Accounts, keys, holds and
 * balance movements are never touched. Stores that expire rows by themselves
 * (Cassandra's TTL) report 0 for their part; files are always swept here.
 */
export function createRetentionSweeper(ports: RetentionPorts, options: { retentionMs: number }) {
  async function sweep(): Promise<{ jobs: number; keys: number; files: number }> {
    const now = ports.clock.now();
    const cutoff = new Date(now.getTime() - options.retentionMs);
    let jobs = 0;
    for (;;) {
      const removed = await ports.jobs.purgeFinished(cutoff, PAGE);
      jobs += removed;
      if (removed < PAGE) break;
    }
    const keys = await ports.idempotency.purgeExpired(now);
    const files = await ports.blobs.purgeOlderThan(cutoff);
    return { jobs, keys, files };
  }
  return { sweep };
}
