import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { context, trace, type Context } from "@opentelemetry/api";
import { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import type { HttpMetrics, RequestTracing } from "../observability.js";
import { serverTiming } from "../../server-timing.js";
import { startTiming, timingOf } from "../request-timing.js";
import { onAnswerEnd } from "./pipelining.js";

/** An incoming X-Request-Id is kept when it is short and plain; otherwise the gateway makes one. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Each request's id: the client's X-Request-Id when usable, else a UUID. In every log line of the request as `request_id`. */
export function requestIdOf(request: IncomingMessage): string {
  const given = request.headers["x-request-id"];
  return typeof given === "string" && REQUEST_ID.test(given) ? given : randomUUID();
}

/** Probes and scrapes come every few seconds from machines: their log lines and traces would drown the rest. */
const QUIET_PATHS = new Set(["/livez", "/readyz", "/healthz", "/metrics"]);
function isQuiet(request: FastifyRequest): boolean {
  const url = request.url;
  const query = url.indexOf("?");
  return QUIET_PATHS.has(query < 0 ? url : url.slice(0, query));
}

/** Fastify's request lines: the completion at info (`request_id`, status, time), the arrival at debug; none for probes and scrapes. */
export class GatewayLogController extends LogController {
  constructor() {
    super({ requestIdLogLabel: "request_id", disableRequestLogging: isQuiet });
  }

  override incomingRequest(request: FastifyRequest, _reply: FastifyReply): void {
    request.log.debug({ req: request }, "incoming request");
  }
}

/** A request's route as its template (/api/v1/jobs/:jobId): a bounded label. Unrouted requests share one. */
const routeOf = (request: FastifyRequest) => request.routeOptions.url ?? "unmatched";

/** The request's Server-Timing so far: set by onSend, or by a stream's route when its first event is ready (it writes its own head). */
export function serverTimingHeader(request: FastifyRequest): { "server-timing"?: string } {
  const timing = timingOf(request);
  return timing ? { "server-timing": serverTiming(performance.now() - timing.startedAt, timing.upstreamMs) } : {};
}

const SPAN_CONTEXT = Symbol("spanContext");
type Traced = FastifyRequest & { [SPAN_CONTEXT]?: Context };

/** The http_server_* metrics (when the answer ends, or 499), X-Request-Id, Server-Timing and, with tracing, a server span. */
export function observeRequests(app: FastifyInstance, metrics: { readonly http: HttpMetrics }, tracing: RequestTracing | undefined): void {
  app.addHook("onRequest", (request, reply, done) => {
    const timing = startTiming(request);
    metrics.http.inFlight.inc();
    reply.header("x-request-id", request.id);
    const route = routeOf(request);
    const method = request.method;
    const span = tracing && !isQuiet(request)
      ? tracing.startServerSpan(`${method} ${route}`, request.headers, { "http.request.method": method, "http.route": route, "url.scheme": "http" })
      : undefined;
    // Not the answer's 'close' alone: an answer queued behind another on a connection that dies never emits it.
    onAnswerEnd(reply.raw, () => {
      metrics.http.inFlight.dec();
      // Each family keeps one cell per label set (RequestFamily), so asking again finds the same cell.
      const labels = { method, route, status_code: reply.raw.writableFinished ? String(reply.raw.statusCode) : "499" };
      const seconds = (performance.now() - timing.startedAt) / 1000;
      const coreSeconds = timing.coreMs / 1000;
      metrics.http.requests.cell(labels).inc();
      metrics.http.duration.cell(labels).observe(seconds);
      metrics.http.own.cell(labels).observe(Math.max(0, seconds - coreSeconds));
      if (coreSeconds > 0) metrics.http.core.cell(labels).observe(coreSeconds);
      if (span) {
        span.setAttribute("http.response.status_code", reply.raw.statusCode);
        span.end();
      }
    });
    if (!span) return done();
    // The request's log lines name its trace.
    request.log = request.log.child({ trace_id: span.spanContext().traceId });
    const active = trace.setSpan(context.active(), span);
    (request as Traced)[SPAN_CONTEXT] = active;
    context.with(active, done);
  });
  if (tracing) {
    // The body is read between onRequest and preHandler, outside the request's context: the handler gets it back here.
    app.addHook("preHandler", (request, _reply, done) => {
      const active = (request as Traced)[SPAN_CONTEXT];
      if (active) context.with(active, done);
      else done();
    });
  }
  app.addHook("onSend", (request, reply, payload, done) => {
    if (!reply.raw.headersSent) reply.headers(serverTimingHeader(request));
    done(null, payload);
  });
}
