import { TOPICS, type EventBus } from "../../ports/event-bus.js";
import { isDependencyUnavailable } from "../../ports/dependency.js";
import type { GenerationRequested } from "./accept-job.js";

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
  log: (message: string, error?: unknown) => void,
  options: { retryMs?: number; maxBacklog?: number } = {},
): Announcer {
  const retryMs = options.retryMs ?? 1000;
  const maxBacklog = options.maxBacklog ?? 100_000;
  const backlog = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const publish = (jobId: string) => bus.publish<GenerationRequested>(TOPICS.generationRequested, jobId, { jobId });

  function schedule(): void {
    if (timer || closed || backlog.size === 0) return;
    timer = setTimeout(() => {
      timer = undefined;
      void flush();
    }, retryMs);
    timer.unref();
  }

  async function flush(): Promise<void> {
    for (const jobId of [...backlog]) {
      if (closed) return;
      try {
        await publish(jobId);
        backlog.delete(jobId);
      } catch {
        break; // still unavailable: try again later
      }
    }
    schedule();
  }

  return {
    async announce(jobId) {
      try {
        await publish(jobId);
      } catch (error) {
        if (backlog.size === 0 && !isDependencyUnavailable(error)) log(`announcing job ${jobId} failed; retrying in the background`, error);
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
