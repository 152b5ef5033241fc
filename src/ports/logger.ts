/** Facts of a log line: snake_case fields (request_id, job_id, account_id, …), `err` for an error. */
export type LogFacts = Record<string, unknown>;

export interface LogFn {
  (facts: LogFacts, message: string): void;
  (message: string): void;
}

/**
 * The one structured log (pino in every role; see runtime/logger.ts). Levels:
 * `error` for what an operator must fix (a crash, a lost write), `warn` for
 * what degrades service (a dependency down, a retry in the background),
 * `info` for lifecycle (started, stopped, a dependency back), `debug` for a
 * client's own mistakes and aborts. Never a secret in a message or a fact.
 */
export interface Logger {
  readonly debug: LogFn;
  readonly info: LogFn;
  readonly warn: LogFn;
  readonly error: LogFn;
  /** A logger whose every line carries `bindings` too (a job's id, a component's name). */
  child(bindings: LogFacts): Logger;
}

const ignore: LogFn = () => {};

/** Writes nothing (tests that do not read the log, tools). */
export const silentLogger: Logger = { debug: ignore, info: ignore, warn: ignore, error: ignore, child: () => silentLogger };
