/**
 * A backing server (Cassandra, Kafka, the SQLite file) that the process
 * needs. Adapters turn "cannot reach it" into DependencyUnavailableError, so
 * the edges answer 503 with Retry-After instead of 500, and readiness probes
 * ask `check` what the state is.
 */
export interface DependencyProbe {
  /** Shown in /readyz and logs: "cassandra", "kafka", "sqlite". */
  readonly name: string;
  /** Resolves when the dependency answers; rejects (or is aborted) when it does not. */
  check(signal: AbortSignal): Promise<void>;
}

/** The dependency cannot be reached (down, stalled, refusing): retry later. Never a bug of ours. */
export class DependencyUnavailableError extends Error {
  constructor(
    readonly dependency: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "DependencyUnavailableError";
  }
}

export const isDependencyUnavailable = (error: unknown): error is DependencyUnavailableError =>
  error instanceof DependencyUnavailableError;
