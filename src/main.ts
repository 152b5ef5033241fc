import closeWithGrace from "close-with-grace";
import { loadConfig } from "./config/config.js";
import { startTracing } from "./adapters/observability/tracing.js";
import { createLogger } from "./runtime/logger.js";
import { launchService } from "./runtime/start-service.js";

const config = loadConfig();
const logger = createLogger(config.logLevel, [...config.roles].join(","));
/** Start, ready and stop are written whatever LOG_LEVEL (at info, or debug when that is the level): an operator always sees them. */
const lifecycle = logger.child({}, { level: config.logLevel === "debug" || config.logLevel === "trace" ? config.logLevel : "info" });
// Before anything else opens: spans of start-up work, and every later request's, go to the collector.
const tracing = config.tracing ? await startTracing(config.tracing) : undefined;
if (config.tracing) lifecycle.info({ service_name: config.tracing.serviceName }, "tracing on: OTLP to the configured endpoint");
const launched = await launchService(config, { logger }).catch((error: NodeJS.ErrnoException) => {
  // A port in use (two workers on one host need their own METRICS_PORT) is an operator's to fix: said plainly, exit 1.
  const port = error.code === "EADDRINUSE" ? ` (port ${(error as { port?: number }).port} is in use: set PORT, GRPC_PORT or METRICS_PORT)` : "";
  lifecycle.fatal({ err: error }, `start-up failed${port}`);
  process.exit(1);
});
if (launched.httpUrl) lifecycle.info({ url: launched.httpUrl }, "gateway (REST/SSE) listening (503 until ready)");
if (launched.metricsUrl && launched.metricsUrl !== launched.httpUrl) lifecycle.info({ url: launched.metricsUrl }, "metrics listening");

/** How much longer than DRAIN_DELAY and SHUTDOWN_GRACE a stop may take (closing the stores and the bus, the last spans) before it is cut short. */
const STOP_SLACK_MS = 30_000;

/**
 * SIGTERM: /readyz turns 503 at once and requests are still served for
 * DRAIN_DELAY (a load balancer takes the process out), then no new requests
 * or jobs, in-flight work finishes within SHUTDOWN_GRACE, the rest is handed
 * back (leases lapse at once), exit 0. SIGINT (Ctrl-C) skips the drain delay.
 *
 * close-with-grace runs the stop: for SIGINT and SIGTERM (heard below), for
 * SIGHUP, SIGQUIT and SIGUSR2 (as SIGINT), and for an uncaught exception or
 * unhandled rejection (logged, stopped without the drain, exit 1). A stop
 * that fails exits 1; one that takes longer than DRAIN_DELAY + SHUTDOWN_GRACE
 * + 30 s is cut short, exit 1; another uncaught error while stopping exits 1
 * at once. The fault signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
 * SIGTRAP) keep Node's default: no JavaScript should run after one.
 */
let stopping = false;
/** The SIGINT or SIGTERM that began the stop (close-with-grace hands its callback only the signals it hears itself). */
let stopSignal: NodeJS.Signals | undefined;
const grace = closeWithGrace(
  {
    delay: config.drainDelayMs + config.shutdownGraceMs + STOP_SLACK_MS,
    // SIGINT and SIGTERM are heard below, where a repeat is ignored: `npm start` forwards to this process the very
    // signal that a terminal's Ctrl-C or a kill of the process group has sent it already (close-with-grace would exit 1).
    skip: ["SIGINT", "SIGTERM", "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT", "SIGTRAP"],
    // What close-with-grace logs itself: a stop that failed.
    logger: { error: (error: unknown) => logger.error({ err: error }, "shutdown failed") },
    onTimeout: (ms) => logger.error({ timeout_ms: ms }, `shutdown did not finish within ${ms} ms; exiting`),
    onSecondSignal: (signal) => logger.error({ signal }, `${signal} while stopping; exiting`),
    onSecondError: (error) => logger.fatal({ err: error }, "another uncaught error while stopping; exiting"),
  },
  async ({ signal, err }) => {
    stopping = true; // a stop close-with-grace began itself
    if (err) lifecycle.fatal({ err }, "uncaught error; stopping");
    else lifecycle.info({ signal: signal ?? stopSignal }, "stopping");
    await launched.close({ drain: !signal && stopSignal === "SIGTERM" && !err });
    await tracing?.shutdown(); // the last spans are sent before the exit
    lifecycle.info("stopped");
  },
);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    stopSignal = signal;
    grace.close();
  });
}

const service = await launched.ready.catch((error) => {
  if (stopping) return new Promise<never>(() => {}); // a signal is shutting us down: let it finish
  logger.fatal({ err: error }, "start-up failed");
  process.exit(1);
});

lifecycle.info(
  { roles: [...config.roles], backends: service.backends ?? `gateway in front of ${config.coreUrl}`, core: service.grpcUrl, panel: service.httpUrl ? `${service.httpUrl}/panel/` : undefined },
  "ready",
);

// A first run's welcome, for the person at the terminal: on stderr, not in the JSON log (it may name this run's admin token).
if (service.httpUrl && service.core && !(await service.core.deps.ledger.hasAnyAccount())) {
  const token = config.adminTokenGenerated ? config.adminToken : "$ADMIN_TOKEN";
  process.stderr.write(`
Web panel: ${service.httpUrl}/panel/   Metrics: ${service.httpUrl}/metrics   Core (gRPC): ${service.grpcUrl ?? "-"}
No accounts yet. ${config.adminTokenGenerated ? `ADMIN_TOKEN was not set; this run's admin token is ${config.adminToken}` : ""}
In a browser: open ${service.httpUrl}/panel/, sign in with the admin token, open an account, issue its owner
token, sign in as its owner and create a key. Or from a shell, an account and a key for every model:

  ACCOUNT=$(curl -s -X POST ${service.httpUrl}/admin/v1/accounts -H "Authorization: Bearer ${token}" \\
    -H "Content-Type: application/json" -d '{"name":"me","balance":"10.00"}' | sed 's/.*"account_id":"\\([^"]*\\)".*/\\1/')
  curl -s -X POST ${service.httpUrl}/admin/v1/accounts/$ACCOUNT/keys -H "Authorization: Bearer ${token}" \\
    -H "Content-Type: application/json" -d '{"models":["*","aimodel-3.1-flash-lite-image"]}'
`);
}
