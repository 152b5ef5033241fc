import { DependencyUnavailableError } from "../../ports/dependency.js";

/** The name the service reports for the embedded store (readiness, logs). */
export const SQLITE_DEPENDENCY = "sqlite";

/**
 * Result codes that mean "the file cannot be used right now" (locked past the
 * busy timeout, disk full, I/O error, cannot open, read-only): the request
 * may succeed later, so the edges answer 503. Anything else (a constraint, a
 * misuse, a corrupt file) is not retryable and propagates as it is.
 */
const UNAVAILABLE = [/^SQLITE_BUSY(_|$)/, /^SQLITE_FULL$/, /^SQLITE_IOERR(_|$)/, /^SQLITE_CANTOPEN(_|$)/, /^SQLITE_READONLY(_|$)/];

export function sqliteCodeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("SQLITE_") ? code : undefined;
}

export function isSqliteUnavailable(error: unknown): boolean {
  const code = sqliteCodeOf(error);
  return code !== undefined && UNAVAILABLE.some((pattern) => pattern.test(code));
}

/** DependencyUnavailableError for the codes above, the error itself otherwise. */
export function mapSqliteError(error: unknown): unknown {
  if (!isSqliteUnavailable(error)) return error;
  return new DependencyUnavailableError(
    SQLITE_DEPENDENCY,
    `the SQLite database cannot be used now (${sqliteCodeOf(error)}): ${(error as Error).message}`,
    { cause: error },
  );
}

/** Runs synchronous database work, mapping "cannot use the file now" to DependencyUnavailableError. */
export function sqliteCall<T>(work: () => T): T {
  try {
    return work();
  } catch (error) {
    throw mapSqliteError(error);
  }
}
