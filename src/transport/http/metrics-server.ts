import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Readiness } from "../../core/index.js";
import type { MetricsExposition } from "./observability.js";

const JSON_TYPE = { "content-type": "application/json" };

/** The probes as the gateway answers them: /livez 200 while the process runs, /readyz (and /healthz) 200 or 503 with the reason. */
function answerProbe(path: string, readiness: Readiness, response: ServerResponse): boolean {
  if (path === "/livez") {
    response.writeHead(200, JSON_TYPE).end('{"status":"ok"}');
    return true;
  }
  if (path !== "/readyz" && path !== "/healthz") return false;
  const report = readiness.current;
  const body = JSON.stringify({ status: report.status, ...(report.reason ? { reason: report.reason } : {}), checks: report.checks });
  if (report.ready) response.writeHead(200, JSON_TYPE).end(body);
  else response.writeHead(503, { ...JSON_TYPE, "retry-after": String(readiness.retryAfterSeconds) }).end(body);
  return true;
}

/**
 * The port of a process without the gateway (ROLE=worker, webhooks): GET /metrics, and the probes /livez and /readyz
 * for an orchestrator; small on purpose, no body read.
 */
export async function listenMetrics(
  metrics: MetricsExposition, host: string, port: number, readiness: Readiness,
): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    const path = (request.url ?? "").split("?")[0] ?? "";
    if (request.method === "GET" && answerProbe(path, readiness, response)) return;
    if (request.method !== "GET" || path !== "/metrics") {
      const message = "only GET /metrics, /livez and /readyz are served on this port";
      response.writeHead(404, JSON_TYPE).end(JSON.stringify({ error: { code: "not_found", message } }));
      return;
    }
    metrics.exposition().then(
      (text) => response.writeHead(200, { "content-type": metrics.contentType }).end(text),
      () => response.writeHead(503, { "retry-after": "5" }).end(),
    );
  });
  server.headersTimeout = 5_000;
  server.requestTimeout = 10_000;
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
