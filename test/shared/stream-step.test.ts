// backends: embedded
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SteppedStream, timedWaits, type StreamStep } from "../../src/shared/stream-step.js";

/** A source that records what happened to it: how far it got, and whether its cleanup (finally) ran. */
function source(values: number[], failAt?: number) {
  const seen = { opened: 0, produced: 0, cleanedUp: 0 };
  async function* generate() {
    seen.opened++;
    try {
      for (const [i, value] of values.entries()) {
        if (i === failAt) throw new Error(`source failed at ${i}`);
        seen.produced++;
        yield value;
      }
    } finally {
      seen.cleanedUp++;
    }
  }
  return { seen, generate };
}

/** A step that records its hooks' calls, in order. */
/** A source that never ends and whose close (`return`) throws `message`. */
function endlessWithFailingReturn(message: string): AsyncIterable<number> {
  return {
    [Symbol.asyncIterator]: () => ({
      next: async () => ({ done: false, value: 1 }),
      return: async () => {
        throw new Error(message);
      },
    }),
  };
}

function recorded(open: () => AsyncIterable<number>, map: (value: number) => string = String) {
  const calls: string[] = [];
  const step: StreamStep<number, string> = {
    open: () => {
      calls.push("open");
      return open();
    },
    map: (value) => {
      calls.push(`map ${value}`);
      return map(value);
    },
    pulling: () => calls.push("pulling"),
    pulled: () => calls.push("pulled"),
    ended: (outcome, error) => calls.push(`ended ${outcome}${error ? ` (${(error as Error).message})` : ""}`),
    failure: (error) => new Error(`wrapped: ${(error as Error).message}`),
  };
  return { calls, stream: new SteppedStream(step) };
}

async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const value of stream) out.push(value);
  return out;
}

describe("SteppedStream", () => {
  it("when a source ends, then every value comes through mapped, each pull is reported, and it ends once as done", async () => {
    const { seen, generate } = source([1, 2]);
    const { calls, stream } = recorded(generate);
    assert.deepEqual(await collect(stream), ["1", "2"]);
    assert.deepEqual(calls, ["open", "pulling", "pulled", "map 1", "pulling", "pulled", "map 2", "pulling", "pulled", "ended done"]);
    assert.deepEqual(seen, { opened: 1, produced: 2, cleanedUp: 1 });
    assert.deepEqual(await stream.next(), { done: true, value: undefined });
    assert.equal(calls.filter((c) => c.startsWith("ended")).length, 1);
  });

  it("when it is never pulled, then its source is never opened and it never ends", async () => {
    const { seen, generate } = source([1]);
    const { calls, stream } = recorded(generate);
    assert.deepEqual(await stream.return(), { done: true, value: undefined });
    assert.deepEqual(calls, []);
    assert.equal(seen.opened, 0);
  });

  it("when the consumer stops early, then the source is closed (its cleanup runs) and it ends once as returned", async () => {
    const { seen, generate } = source([1, 2, 3]);
    const { calls, stream } = recorded(generate);
    for await (const value of stream) {
      assert.equal(value, "1");
      break;
    }
    assert.deepEqual(seen, { opened: 1, produced: 1, cleanedUp: 1 });
    assert.deepEqual(calls.at(-1), "ended returned");
    assert.deepEqual(await stream.next(), { done: true, value: undefined });
    await stream.return();
    assert.equal(calls.filter((c) => c.startsWith("ended")).length, 1);
  });

  it("when the source fails, then the failure passes through `failure` after it ends once as failed", async () => {
    const { seen, generate } = source([1, 2], 1);
    const { calls, stream } = recorded(generate);
    await assert.rejects(collect(stream), /^Error: wrapped: source failed at 1$/);
    assert.deepEqual(calls.slice(-2), ["pulled", "ended failed (source failed at 1)"]);
    assert.deepEqual(seen, { opened: 1, produced: 1, cleanedUp: 1 });
    assert.deepEqual(await stream.next(), { done: true, value: undefined });
  });

  it("when map throws, then the source is closed and the stream fails with map's error", async () => {
    const { seen, generate } = source([1, 2, 3]);
    const { calls, stream } = recorded(generate, (value) => {
      if (value === 2) throw new Error("cannot map 2");
      return String(value);
    });
    const out: string[] = [];
    await assert.rejects(async () => {
      for await (const value of stream) out.push(value);
    }, /^Error: wrapped: cannot map 2$/);
    assert.deepEqual(out, ["1"]);
    assert.deepEqual(seen, { opened: 1, produced: 2, cleanedUp: 1 });
    assert.equal(calls.at(-1), "ended failed (cannot map 2)");
  });

  it("when the source's close fails after map threw, then the stream still fails with map's error", async () => {
    const failingClose = endlessWithFailingReturn("close failed");
    const { stream } = recorded(() => failingClose, () => {
      throw new Error("cannot map");
    });
    await assert.rejects(stream.next(), /^Error: wrapped: cannot map$/);
  });

  it("when the consumer stops early and the source's cleanup fails, then it ends once as failed and the failure passes through `failure`", async () => {
    const failingCleanup = endlessWithFailingReturn("cleanup failed");
    const { calls, stream } = recorded(() => failingCleanup);
    assert.deepEqual(await stream.next(), { done: false, value: "1" });
    await assert.rejects(stream.return(), /^Error: wrapped: cleanup failed$/);
    assert.deepEqual(calls.filter((c) => c.startsWith("ended")), ["ended failed (cleanup failed)"]);
  });

  it("when open throws, then the first pull fails through `failure` and it ends once as failed", async () => {
    const { calls, stream } = recorded(() => {
      throw new Error("cannot open");
    });
    await assert.rejects(stream.next(), /^Error: wrapped: cannot open$/);
    assert.deepEqual(calls, ["open", "ended failed (cannot open)"]);
    assert.deepEqual(await stream.next(), { done: true, value: undefined });
  });

  it("when the consumer returns while a pull is pending, then that pull resolves as done and no value is mapped", async () => {
    let release!: () => void;
    const slow: AsyncIterable<number> = {
      [Symbol.asyncIterator]: () => ({
        next: () => new Promise((resolve) => (release = () => resolve({ done: false, value: 7 }))),
        return: async () => ({ done: true, value: undefined }),
      }),
    };
    const { calls, stream } = recorded(() => slow);
    const pending = stream.next();
    await stream.return();
    release();
    assert.deepEqual(await pending, { done: true, value: undefined });
    assert.ok(!calls.includes("map 7"));
    assert.deepEqual(calls.filter((c) => c.startsWith("ended")), ["ended returned"]);
  });

  it("when a stream is timed, then each wait for a value and for its end is handed over once, the first from the given start", async () => {
    const gaps = [30, 0, 30];
    async function* slow() {
      for (const [i, gap] of gaps.entries()) {
        if (gap) await new Promise((resolve) => setTimeout(resolve, gap));
        if (i < gaps.length - 1) yield i;
      }
    }
    const waits: number[] = [];
    const started = performance.now();
    const values = await collect(timedWaits(slow(), (ms) => waits.push(ms), started - 100));
    assert.deepEqual(values, [0, 1]);
    assert.equal(waits.length, 3, "two values and the end");
    assert.ok(waits[0]! >= 125, `the first wait counts from the given start: ${waits[0]}`);
    assert.ok(waits[1]! < waits[0]! - 50, `a value ready at once waits from its own pull, not from the start: ${waits[1]}`);
    assert.ok(waits[2]! >= 25, `the wait for the end: ${waits[2]}`);
  });
});
