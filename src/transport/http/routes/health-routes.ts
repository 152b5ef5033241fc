import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Readiness } from "../../../core/index.js";
import { lingerUntilDiscarded } from "../edge/body-guard.js";
import { PLATFORM_ERROR } from "../schemas/common.js";
import { sendError, toHttpError } from "../error-replies.js";
import { GatewayError } from "../gateway-error.js";

/** Answered whatever the readiness: the probes, and the metrics (a process that cannot serve is when they matter). */
const PROBES = new Set(["/livez", "/readyz", "/healthz", "/metrics"]);

const checksSchema = { type: "object", additionalProperties: { type: "string", enum: ["up", "down"] } } as const;
const readySchema = {
  type: "object",
  required: ["status", "checks"],
  properties: {
    status: { type: "string", enum: ["ok", "starting", "unavailable", "draining"] },
    reason: { type: "string" },
    checks: checksSchema,
  },
} as const;

/**
 * Probes for load balancers and orchestrators, and the gate that keeps a
 * process that cannot serve from answering 500: until it is started, and
 * while a store it needs is unreachable, every other request gets 503 with
 * Retry-After in its surface's error shape.
 */
export function healthRoutes(readiness: Readiness) {
  return async (app: FastifyInstance) => {
    app.addHook("onRequest", async (request: FastifyRequest, reply: FastifyReply) => {
      const report = readiness.current;
      if (report.serving || PROBES.has(request.url.split("?")[0]!)) return;
      const message = `the service cannot serve right now (${report.reason ?? report.status}); retry shortly`;
      // Refused before its body is read, as the body guard refuses: what the client still sends is discarded, bounded.
      lingerUntilDiscarded(request);
      return sendError(reply, toHttpError(new GatewayError(503, "service_unavailable", message, readiness.retryAfterSeconds)));
    });

    /** The process runs and its event loop answers. */
    app.get("/livez", { schema: { tags: ["health"], operationId: "livez", summary: "The process runs", security: [], response: { 200: { type: "object", properties: { status: { type: "string" } }, required: ["status"] }, "4xx": PLATFORM_ERROR } } }, async () => ({
      status: "ok",
    }));

    /** Stores and bus reachable, start-up finished, not draining: 200; otherwise 503 with the reason. */
    const ready = async (_request: FastifyRequest, reply: FastifyReply) => {
      const report = readiness.current;
      const body = { status: report.status, ...(report.reason ? { reason: report.reason } : {}), checks: report.checks };
      if (report.ready) return body;
      reply.header("retry-after", String(readiness.retryAfterSeconds));
      return reply.code(503).send(body);
    };
    const schema = (operationId: string) => ({
      tags: ["health"],
      operationId,
      summary: "Whether this process can serve (200) or not (503 with Retry-After and the reason)",
      security: [],
      response: { 200: readySchema, 503: readySchema, "4xx": PLATFORM_ERROR },
    });
    app.get("/readyz", { schema: schema("readyz") }, ready);
    // Older probes asked /healthz; it answers exactly as /readyz.
    app.get("/healthz", { schema: schema("healthz") }, ready);
  };
}
