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

/**
 * SIGTERM: /readyz turns 503 at once and requests are still served for
 * DRAIN_DELAY (a load balancer takes the process out), then no new requests
 * or jobs, in-flight work finishes within SHUTDOWN_GRACE, the rest is handed
 * back (leases lapse at once), exit. SIGINT (Ctrl-C) skips the drain delay.
 */
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    lifecycle.info({ signal }, "stopping");
    launched
      .close({ drain: signal === "SIGTERM" })
      .then(() => tracing?.shutdown()) // the last spans are sent before the exit
      .then(
        () => {
          lifecycle.info("stopped");
          process.exit(0);
        },
        (error) => {
          logger.error({ err: error }, "shutdown failed");
          process.exit(1);
        },
      );
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
