/**
 * An attempt for p-retry whose every error is retried. p-retry gives up at once
 * on a TypeError that is not a network error, taking it for a bug; a loop that
 * waits out whatever a driver throws (kafkajs and the Cassandra driver throw
 * some on a server's odd answer while it starts or rebalances) passes it on as
 * an Error of the same name, message and stack, the TypeError as its cause.
 */
export function retryingEveryError<T>(attempt: () => Promise<T>): () => Promise<T> {
  return async () => {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof TypeError)) throw error;
      throw Object.assign(new Error(error.message, { cause: error }), { name: error.name, stack: error.stack });
    }
  };
}
