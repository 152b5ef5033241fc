import type { FastifyInstance } from "fastify";
import type { MetricsExposition } from "../observability.js";
import { PLATFORM_ERROR } from "../schemas/common.js";

/**
 * GET /metrics: the Prometheus text exposition of this process. Not behind
 * the readiness gate (a process that cannot serve is exactly when its
 * numbers matter) and not authenticated, like /readyz: it carries counts by
 * route, model and outcome, never an id, a key or a prompt. An operator who
 * exposes the port publicly keeps /metrics to the scraper's network at the
 * load balancer (docs/operations-observability.md).
 */
export function metricsRoutes(metrics: MetricsExposition) {
  return async (app: FastifyInstance) => {
    app.get("/metrics", {
      schema: {
        tags: ["health"], operationId: "metrics", summary: "Prometheus metrics of this process (text exposition format 0.0.4)", security: [],
        response: {
          200: { description: "Prometheus text format", content: { [metrics.contentType]: { schema: { type: "string" } } } },
          "4xx": PLATFORM_ERROR,
        },
      },
    }, async (_request, reply) => {
      const text = await metrics.exposition();
      return reply.type(metrics.contentType).send(text);
    });
  };
}
