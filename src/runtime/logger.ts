import { pino } from "pino";

/** How the core and the runtime report problems: a message, and the error when there is one. */
export type Log = (message: string, error?: unknown) => void;

/**
 * The process's operational log: pino (the gateway's logger too), JSON lines
 * on stdout at LOG_LEVEL. A message without an error is a warning worth an
 * operator's eye (a dependency lost or back, a start-up wait); with an error
 * it is an error, its stack under `err`.
 */
export function createLog(level: string): Log {
  const logger = pino({ level });
  return (message, error) => (error === undefined ? logger.warn(message) : logger.error({ err: error }, message));
}
