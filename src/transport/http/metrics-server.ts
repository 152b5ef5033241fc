import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { MetricsExposition } from "./observability.js";

/** The metrics port of a process without the gateway (ROLE=worker, webhooks): GET /metrics only; small on purpose, no body read. */
export async function listenMetrics(metrics: MetricsExposition, host: string, port: number): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    const path = (request.url ?? "").split("?")[0];
    if (request.method !== "GET" || path !== "/metrics") {
      response.writeHead(404, { "content-type": "application/json" }).end('{"error":{"code":"not_found","message":"only GET /metrics is served on this port"}}');
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
