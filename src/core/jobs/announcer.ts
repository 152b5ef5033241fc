import type { EventBus } from "../../ports/event-bus.js";
import { isDependencyUnavailable } from "../../ports/dependency.js";
import { generationRequested, type GenerationRequested } from "./accept-job.js";
import type { Logger } from "../../ports/logger.js";

/** Announcements published at once while a backlog drains. */
const FLUSH_BATCH = 64;

export interface Announcer {
  /** Announces a stored job; never throws: what cannot be published now is retried in the background. */
  announce(jobId: string): Promise<void>;
  /** Jobs waiting for their announcement. */
  readonly backlog: number;
  close(): void;
}

/**
 * Announcements of stored jobs. The bus bounds each publish; one that fails
 * (Kafka down or stalled) keeps its job id here and is tried again every
 * `retryMs`, so jobs go out within about a second of the bus's return instead
 * of waiting for the reaper. The reaper still covers a process that dies with
 * a backlog (its jobs are queued in the store).
 */
export function createAnnouncer(
  bus: EventBus,
  logger: Logger,
  options: { retryMs?: number; maxBacklog?: number } = {},
): Announcer {
  const retryMs = options.retryMs ?? 1000;
  const maxBacklog = options.maxBacklog ?? 100_000;
  const backlog = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const publish = (jobId: string) => {
    const { topic, key, event } = generationRequested(jobId);
    return bus.publish<GenerationRequested>(topic, key, event);
  };

  function schedule(): void {
    if (timer || closed || backlog.size === 0) return;
    timer = setTimeout(() => {
      timer = undefined;
      void flush();
    }, retryMs);
    timer.unref();
  }

  /**
   * One announcement first, as a probe: while the bus is still down only that
   * one waits (and nothing piles up inside the bus client). Once it goes
   * through, the rest go in batches, until a batch sees a failure.
   */
  async function flush(): Promise<void> {
    const [first] = backlog;
    if (first === undefined || closed) return;
    try {
      await publish(first);
      backlog.delete(first);
    } catch {
      schedule();
      return;
    }
    while (!closed && backlog.size > 0) {
      const batch = [...backlog].slice(0, FLUSH_BATCH);
      const results = await Promise.allSettled(batch.map(publish));
      results.forEach((result, i) => result.status === "fulfilled" && backlog.delete(batch[i]!));
      if (results.some((result) => result.status === "rejected")) break;
    }
    schedule();
  }

  return {
    async announce(jobId) {
      // A backlog means the bus is failing: queue behind it at once instead of waiting out another publish bound.
      if (backlog.size > 0) {
        if (backlog.size < maxBacklog) backlog.add(jobId);
        schedule();
        return;
      }
      try {
        await publish(jobId);
      } catch (error) {
        if (backlog.size === 0 && !isDependencyUnavailable(error)) logger.warn({ job_id: jobId, err: error }, "announcing the job failed; retrying in the background");
        if (backlog.size < maxBacklog) backlog.add(jobId);
        schedule();
      }
    },
    get backlog() {
      return backlog.size;
    },
    close() {
      closed = true;
      clearTimeout(timer);
    },
  };
}
