import { pino, type DestinationStream, type Logger as PinoLogger } from "pino";
import { currentTraceIds } from "../adapters/observability/tracing.js";
import { isDependencyUnavailable } from "../ports/dependency.js";

/** Facts that may carry a secret, censored at the top of a line and one level down (`{ route: { key } }`). */
const SECRET_FACTS = new Set(["authorization", "key", "secret", "token", "apiKey", "adminToken"]);
/** Request headers that carry a credential, censored in `headers` and `req.headers`. */
const SECRET_HEADERS = new Set(["authorization", "x-goog-api-key", "x-vendor-api-key", "x-admin-token", "cookie"]);
const CENSORED = "[redacted]";

type Facts = Record<string, unknown>;
const isFacts = (value: unknown): value is Facts => typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Error);

/** `facts` with the named fields censored; the same object when it holds none of them (a line's usual case: no copy). */
function censor(facts: Facts, secret: ReadonlySet<string>, nested: (key: string, value: Facts) => Facts): Facts {
  let copy: Facts | undefined;
  for (const key in facts) {
    const value = facts[key];
    const next = secret.has(key) && value !== undefined ? CENSORED : isFacts(value) ? nested(key, value) : value;
    if (next !== value) (copy ??= { ...facts })[key] = next;
  }
  return copy ?? facts;
}

const headersOnly = (key: string, value: Facts) => (key === "headers" ? censor(value, SECRET_HEADERS, (_k, v) => v) : value);
const oneLevelDown = (key: string, value: Facts) => (key === "headers" ? censor(value, SECRET_HEADERS, (_k, v) => v) : censor(value, SECRET_FACTS, headersOnly));

/**
 * The net under the rule that the log never holds a key, a token, a webhook
 * secret or a signature (messages are written without them in the first
 * place). It copies a line only when the line holds one (not pino's `redact`:
 * docs/decisions/0022-log-secret-net.md).
 */
export function censorSecrets(facts: Facts): Facts {
  return censor(facts, SECRET_FACTS, oneLevelDown);
}

/**
 * The process's one logger: pino, JSON lines on stdout (or `destination`) at
 * LOG_LEVEL, shared by the gateway (Fastify's request log), the core, the
 * workers and the adapters. Each line carries `role` (the process's roles)
 * and, inside a traced operation, `trace_id` and `span_id`.
 */
export function createLogger(level: string, roles: string, destination?: DestinationStream): PinoLogger {
  const options = {
    level,
    base: { pid: process.pid, role: roles },
    mixin: () => currentTraceIds() ?? {},
    formatters: { log: censorSecrets },
    // A child's bindings skip formatters.log: a binding named like a secret is censored by its serializer.
    serializers: Object.fromEntries([...SECRET_FACTS].map((name) => [name, () => CENSORED])),
  };
  return destination ? pino(options, destination) : pino(options);
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
