import { pino, type Logger as PinoLogger } from "pino";
import { currentTraceIds } from "../adapters/observability/tracing.js";
import { isDependencyUnavailable } from "../ports/dependency.js";

/**
 * Fields that may carry a secret, censored wherever they appear in a line's
 * facts (one level deep, and in a request's headers): the log never holds a
 * key, a token, a webhook secret or a signature. Messages are written
 * without them in the first place; this is the net under that rule.
 */
const SECRET_PATHS = [
  "authorization", "*.authorization", "headers.authorization", "req.headers.authorization",
  "headers['x-goog-api-key']", "headers['x-vendor-api-key']", "headers['x-admin-token']", "headers.cookie",
  "key", "*.key", "secret", "*.secret", "token", "*.token", "apiKey", "*.apiKey", "adminToken", "*.adminToken",
];

/**
 * The process's one logger: pino, JSON lines on stdout at LOG_LEVEL, shared
 * by the gateway (Fastify's request log), the core, the workers and the
 * adapters. Each line carries `role` (the process's roles) and, inside a
 * traced operation, `trace_id` and `span_id`.
 */
export function createLogger(level: string, roles: string): PinoLogger {
  return pino({
    level,
    base: { pid: process.pid, role: roles },
    mixin: () => currentTraceIds() ?? {},
    redact: { paths: SECRET_PATHS, censor: "[redacted]" },
  });
}

/**
 * How a failure of background work (a handler, a reaper pass, an RPC) is
 * logged: an error with its stack; but a dependency that is down is reported
 * once per state change by the dependency monitor, not once per failed
 * request or pass, so those are debug lines here.
 */
export function failureLog(logger: PinoLogger): (message: string, error: unknown) => void {
  return (message, error) => {
    if (isDependencyUnavailable(error)) logger.debug({ err: error }, message);
    else logger.error({ err: error }, message);
  };
}
