import { setTimeout as delay } from "node:timers/promises";
import { inspect } from "node:util";

export interface EventuallyOptions {
  /** How long the condition may take to hold (15 s unless said). */
  readonly timeoutMs?: number;
  /** The pause between two looks (20 ms unless said). */
  readonly intervalMs?: number;
  /** What is waited for, as the failure names it. */
  readonly what?: string;
}

/**
 * The suite's one way to wait for something to happen (never a fixed sleep): looks with `probe` until `predicate`
 * holds for what it returns, and returns that; past the deadline, fails naming `what` and the last value seen. A
 * probe that throws ends the wait at once with its error (a child that exited, an answer that can never come).
 * Without a predicate, the probe's value must be truthy.
 */
export async function eventually<T>(
  probe: () => T | Promise<T>,
  predicate: (value: T) => boolean = (value) => Boolean(value),
  { timeoutMs = 15_000, intervalMs = 20, what = "condition" }: EventuallyOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T = await probe();
  while (!predicate(last)) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${inspect(last, { depth: 4, breakLength: Infinity })}`);
    }
    await delay(intervalMs);
    last = await probe();
  }
  return last;
}
