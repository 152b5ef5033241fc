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
import { setTimeout as sleep } from "node:timers/promises";
import type { Consumer } from "kafkajs";
import pRetry from "p-retry";
import { retryingEveryError } from "../../shared/every-error.js";
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
  const stopping = new AbortController();
  let current = options.create();
  /** A replacement under way (for stop() to await); `due` until a replacement consumer runs. */
  let replacing: Promise<void> | undefined;
  let due = false;

  function watch(consumer: Consumer): void {
    consumer.on(consumer.events.CRASH, (event) => {
      const { error, restart } = event.payload;
      options.logger.warn({ group: options.label }, `kafka consumer ${options.label} crashed${restart ? " (kafkajs restarts it)" : "; replacing it"}: ${describe(error)}`);
      if (!restart && consumer === current && !due && !stopping.signal.aborted) {
        due = true;
        replacing = replace();
      }
    });
  }

  /**
   * After `initialDelayMs`, a new consumer in place of the current one, tried again after a delay
   * that doubles up to `maxDelayMs` whatever the error, until one runs or stop() is called.
   */
  async function replace(): Promise<void> {
    const { signal } = stopping;
    try {
      await sleep(initialDelayMs, undefined, { signal });
      await pRetry(
        retryingEveryError(async () => {
          await current.disconnect().catch(() => undefined);
          signal.throwIfAborted();
          const next = options.create();
          watch(next);
          current = next;
          await options.start(next);
          due = false; // from here a crash of this consumer is replaced in turn
        }),
        {
          retries: Infinity,
          minTimeout: Math.min(initialDelayMs * 2, maxDelayMs),
          factor: 2,
          maxTimeout: maxDelayMs,
          signal,
          onFailedAttempt: ({ error }) => {
            if (!signal.aborted) options.logger.warn({ group: options.label }, `kafka consumer ${options.label} could not be replaced yet: ${describe(error)}`);
          },
        },
      );
      options.logger.info({ group: options.label }, `kafka consumer ${options.label} replaced and running`);
    } catch {
      // Only stop() ends the replacing (every error is retried); it disconnects whatever consumer is current.
    }
  }

  watch(current);
  try {
    await options.start(current);
  } catch (error) {
    stopping.abort();
    await current.disconnect().catch(() => undefined);
    throw error;
  }

  let stopped: Promise<void> | undefined;
  return {
    get consumer() {
      return current;
    },
    stop() {
      stopped ??= (async () => {
        stopping.abort();
        await replacing;
        // disconnect() stops fetching, waits for the handlers in flight, commits and leaves the group.
        await current.disconnect();
      })();
      return stopped;
    },
  };
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
