/**
 * What a pass-through layer over an async stream does at each step. Every
 * hook is synchronous, and each runs at most once per step.
 */
export interface StreamStep<T, U> {
  /** Opens the source, at the first pull (as an async generator starts at its first `next`); may throw (the stream then fails). */
  open(): AsyncIterable<T>;
  /** Each value on its way through (may throw: the source is then closed and the stream fails). */
  map(value: T): U;
  /** Called before each pull from the source. */
  pulling?(): void;
  /** The source produced a value, or ended (`done`), or failed. */
  pulled?(): void;
  /**
   * Once, when the stream is over: the source ended (`outcome` "done"), failed
   * ("failed", with the error), or the consumer stopped early ("returned").
   */
  ended?(outcome: "done" | "failed" | "returned", error?: unknown): void;
  /** What a failure becomes on its way out (after `ended`). */
  failure?(error: unknown): unknown;
}

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * An async stream passed through `step`: the value mapped, the hooks run, the
 * source closed when the consumer stops early. An async generator wrapping
 * another (`for await … yield`) makes several promises and a request per
 * value, and the gateway's text streams pass through several such layers
 * (decision 0023); this makes one promise per value. Pulled one value at a time, as `for await` pulls.
 * Nothing runs until the first pull: a stream never pulled never opens its
 * source, and `ended` is called only for a stream that was pulled (once
 * `open` was called, even if it threw).
 */
export class SteppedStream<T, U> implements AsyncIterableIterator<U> {
  private over = false;
  private source: AsyncIterator<T> | undefined;

  constructor(private readonly step: StreamStep<T, U>) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<U>> {
    if (this.over) return Promise.resolve(DONE);
    let pulled: Promise<IteratorResult<T>>;
    try {
      this.source ??= this.step.open()[Symbol.asyncIterator]();
      this.step.pulling?.();
      pulled = this.source.next();
    } catch (error) {
      return this.fail(error, false);
    }
    return pulled.then(this.onResult, this.onError);
  }

  /**
   * The consumer stopped early: the source is closed (its cleanup awaited),
   * then the stream is over; a cleanup that fails ends it as failed.
   */
  async return(): Promise<IteratorResult<U>> {
    if (this.over) return DONE;
    this.over = true;
    if (!this.source) return DONE; // never pulled
    try {
      await this.source.return?.();
    } catch (error) {
      this.step.ended?.("failed", error);
      throw this.step.failure ? this.step.failure(error) : error;
    }
    this.step.ended?.("returned");
    return DONE;
  }

  private readonly onResult = (result: IteratorResult<T>): IteratorResult<U> | Promise<IteratorResult<U>> => {
    this.step.pulled?.();
    if (this.over) return DONE; // returned while this pull was pending
    if (result.done) {
      this.over = true;
      this.step.ended?.("done");
      return DONE;
    }
    let value: U;
    try {
      value = this.step.map(result.value);
    } catch (error) {
      return this.fail(error, true);
    }
    return { done: false, value };
  };

  private readonly onError = (error: unknown): Promise<IteratorResult<U>> => {
    this.step.pulled?.();
    return this.fail(error, false);
  };

  /** Ends the stream with `error`; `closeSource`: the source is still open (map threw), so it is closed first. */
  private async fail(error: unknown, closeSource: boolean): Promise<IteratorResult<U>> {
    if (this.over) return DONE;
    this.over = true;
    if (closeSource) {
      try {
        await this.source?.return?.();
      } catch {
        // The first failure is the stream's, as with a `for await` loop that throws.
      }
    }
    this.step.ended?.("failed", error);
    throw this.step.failure ? this.step.failure(error) : error;
  }
}

/**
 * `stream` as it is, with the time spent waiting for each of its values (and
 * for its end) handed to `waited`, in ms. The first wait counts from
 * `firstSince` when given (the call that made the stream), each later one from its pull.
 */
export function timedWaits<T>(stream: AsyncIterable<T>, waited: (ms: number) => void, firstSince?: number): AsyncIterableIterator<T> {
  let since = firstSince ?? 0;
  let pulls = firstSince === undefined ? 1 : 0;
  return new SteppedStream<T, T>({
    open: () => stream,
    map: (value) => value,
    pulling: () => {
      if (pulls++ > 0) since = performance.now();
    },
    pulled: () => waited(performance.now() - since),
  });
}

/**
 * A stream response (an interceptor's) whose messages pass through `step`
 * unchanged unless `step.map` says otherwise: the one way an interceptor
 * watches a server stream's messages, end and failure.
 */
export function passThrough<R extends { readonly message: AsyncIterable<unknown> }>(
  response: R, step: Omit<StreamStep<unknown, unknown>, "open" | "map"> & Partial<Pick<StreamStep<unknown, unknown>, "map">>,
): R {
  return { ...response, message: new SteppedStream<unknown, unknown>({ open: () => response.message, map: (message) => message, ...step }) };
}
