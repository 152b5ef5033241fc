/**
 * Makes committed writes durable before an answer leaves. A store that
 * commits without flushing each transaction (SQLite in group-commit mode)
 * flushes here, once for every write committed before the call, so many
 * concurrent answers share one flush. Stores whose writes are durable when
 * they return need nothing.
 */
export interface WriteBarrier {
  /** Resolves once every write committed before this call is on stable storage. */
  flush(): Promise<void>;
}

export const NO_BARRIER: WriteBarrier = { flush: async () => {} };
