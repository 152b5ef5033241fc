import Fastify, { type FastifyInstance } from "fastify";
import type { Readiness } from "../../core/health/readiness.js";
import type { CoreClients } from "../../runtime/core-clients.js";
import { sendPlatformError, toHttpError } from "./error-replies.js";
import { GatewayError } from "./gateway-error.js";
import { adminRoutes } from "./routes/admin-routes.js";
import { fileRoutes } from "./routes/file-routes.js";
import { healthRoutes } from "./routes/health-routes.js";
import { jobsRoutes } from "./routes/jobs-routes.js";
import { VENDOR_PREFIX, vendorRoutes } from "./routes/vendor-routes.js";

export interface GatewayOptions {
  readonly logLevel: string;
  /** Whether the process can serve: the gate in front of every route and /readyz. */
  readonly readiness: Readiness;
}

/**
 * The REST/SSE edge. It only translates: JSON ⇄ messages, headers ⇄ call
 * options, RPC errors ⇄ the two documented error shapes. Every rule lives in
 * the core behind `core`. Returns an app that is not listening yet.
 */
export async function buildGateway(core: CoreClients, options: GatewayOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger:
      options.logLevel === "silent"
        ? false
        : {
            level: options.logLevel,
            // Result links carry their signature in the query: logs keep the path only.
            serializers: { req: (request) => ({ method: request.method, url: request.url.split("?")[0], remoteAddress: request.ip }) },
          },
    // Idle keep-alive sockets must not hold up shutdown.
    forceCloseConnections: true,
    return503OnClosing: true,
  });

  app.setErrorHandler((error, request, reply) => {
    const mapped = toHttpError(error);
    // Refusals (503 paused, 502 upstream) are answers, not failures of this service: only crashes are logged as errors.
    if (mapped.reason === "internal_error") request.log.error({ err: error }, "request failed");
    return sendPlatformError(reply, mapped);
  });
  app.setNotFoundHandler((request, reply) =>
    sendPlatformError(reply, toHttpError(new GatewayError(404, "not_found", `no route ${request.method} ${request.url.split("?")[0]}`))),
  );

  // Not encapsulated: the gate must stand in front of every route, the 404 handler included.
  await healthRoutes(options.readiness)(app);
  await app.register(jobsRoutes(core));
  await app.register(adminRoutes(core));
  await app.register(fileRoutes(core));
  await app.register(vendorRoutes(core), { prefix: VENDOR_PREFIX });
  return app;
}
