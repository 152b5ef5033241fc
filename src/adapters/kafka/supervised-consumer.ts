/**
 * A Kafka consumer that always comes back.
 *
 * kafkajs restarts a consumer by itself after a crash on an error it deems
 * retriable. A crash on an error it deems final leaves the consumer stopped for
 * good while the process still looks healthy: its topic is never read again
 * until a restart. After a broker restart that happens with group errors such
 * as ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID met on a commit or a heartbeat
 * (tulios/kafkajs#1466, #1712): a worker that stops that way leaves every job
 * queued. Here such a consumer is replaced by a new one of the same group and
 * handler, after a backoff that grows to `maxDelayMs`, until one runs. Offsets
 * are committed only after a handler returned, so the new member starts where
 * the old one stopped.
 */
import type { Consumer } from "kafkajs";
import type { Logger } from "../../ports/logger.js";

export interface SupervisedConsumerOptions {
  /** A new, unconnected consumer (same group id every time). */
  readonly create: () => Consumer;
  /** Connects, subscribes and runs it; resolves once it consumes. */
  readonly start: (consumer: Consumer) => Promise<void>;
  /** Names the consumer in log lines (its group id). */
  readonly label: string;
  readonly logger: Logger;
  readonly initialDelayMs?: number;
  readonly maxDelayMs?: number;
}

export interface SupervisedConsumer {
  /** The consumer running now (a replacement after a final crash). */
  readonly consumer: Consumer;
  /** Stops it for good: no replacement after this. */
  stop(): Promise<void>;
}

/** Starts the first consumer (its failure is the caller's) and replaces it whenever kafkajs gives it up. */
export async function startSupervisedConsumer(options: SupervisedConsumerOptions): Promise<SupervisedConsumer> {
  const initialDelayMs = options.initialDelayMs ?? 500;
  const maxDelayMs = options.maxDelayMs ?? 10_000;
  let current = options.create();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let replacing: Promise<void> | undefined;

  function watch(consumer: Consumer): void {
    consumer.on(consumer.events.CRASH, (event) => {
      const { error, restart } = event.payload;
      options.logger.warn({ group: options.label }, `kafka consumer ${options.label} crashed${restart ? " (kafkajs restarts it)" : "; replacing it"}: ${describe(error)}`);
      if (!restart && consumer === current) schedule(initialDelayMs);
    });
  }

  function schedule(delayMs: number): void {
    if (stopped || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      replacing = replace(delayMs);
    }, delayMs);
  }

  async function replace(delayMs: number): Promise<void> {
    await current.disconnect().catch(() => undefined);
    if (stopped) return;
    const next = options.create();
    watch(next);
    current = next;
    try {
      await options.start(next);
      if (stopped) await next.disconnect().catch(() => undefined);
      else options.logger.info({ group: options.label }, `kafka consumer ${options.label} replaced and running`);
    } catch (error) {
      options.logger.warn({ group: options.label }, `kafka consumer ${options.label} could not be replaced yet: ${describe(error)}`);
      schedule(Math.min(delayMs * 2, maxDelayMs));
    }
  }

  watch(current);
  try {
    await options.start(current);
  } catch (error) {
    stopped = true;
    await current.disconnect().catch(() => undefined);
    throw error;
  }

  let stopping: Promise<void> | undefined;
  return {
    get consumer() {
      return current;
    },
    stop() {
      stopping ??= (async () => {
        stopped = true;
        clearTimeout(timer);
        await replacing;
        // disconnect() stops fetching, waits for the handlers in flight, commits and leaves the group.
        await current.disconnect();
      })();
      return stopping;
    },
  };
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
