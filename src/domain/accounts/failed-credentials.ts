/** AUTH_FAILURE_LIMIT and AUTH_FAILURE_WINDOW: how many wrong credentials a client may present, and within what time. */
export interface FailureBudget {
  /** Failed checks a client may make within one window; the next check is refused until the window ends. */
  readonly limit: number;
  readonly windowMs: number;
  /** Clients remembered at once: past this the one whose window ends soonest is forgotten (memory stays bounded). */
  readonly maxClients: number;
}

interface Window {
  readonly startedAt: number;
  failures: number;
}

/**
 * The failed credential checks of each client (an address, or an IPv6 /64),
 * counted in a fixed window that opens with its first failure: once `limit`
 * failures fall within it, every check of that client is refused until the
 * window ends, when the count starts over. Successes count nothing. Pure
 * state: the caller passes the time (milliseconds) in.
 *
 * Kept in a Map in the order windows opened (a window that starts over is
 * moved to the end), so the first entry is always the one that ends soonest:
 * it is the one dropped when `maxClients` are held, and expired ones are
 * swept from the front as failures arrive.
 */
export class FailedCredentials {
  private readonly windows = new Map<string, Window>();

  constructor(private readonly budget: FailureBudget) {}

  /** Whether any failure of `client` is remembered (a map lookup: callers skip reading the clock when not). */
  holds(client: string): boolean {
    return this.windows.has(client);
  }

  /** Seconds until `client` may try again (at least 1), or undefined when it may try now. */
  refusedFor(client: string, now: number): number | undefined {
    const window = this.windows.get(client);
    if (!window || window.failures < this.budget.limit) return undefined;
    const left = window.startedAt + this.budget.windowMs - now;
    return left > 0 ? Math.max(1, Math.ceil(left / 1000)) : undefined;
  }

  /** One more wrong credential from `client`. */
  failed(client: string, now: number): void {
    this.sweep(now);
    const window = this.windows.get(client);
    if (window && window.startedAt + this.budget.windowMs > now) {
      window.failures++;
      return;
    }
    this.windows.delete(client);
    if (this.windows.size >= this.budget.maxClients) this.windows.delete(this.windows.keys().next().value!);
    this.windows.set(client, { startedAt: now, failures: 1 });
  }

  /** Clients remembered now (for tests of the bound). */
  get size(): number {
    return this.windows.size;
  }

  /** Drops the windows that have ended, from the front (each window is dropped once: constant cost per failure, amortized). */
  private sweep(now: number): void {
    for (const [client, window] of this.windows) {
      if (window.startedAt + this.budget.windowMs > now) return;
      this.windows.delete(client);
    }
  }
}
