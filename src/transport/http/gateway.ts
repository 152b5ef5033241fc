import { createServer } from "node:http";
import type { ConnectError } from "@connectrpc/connect";
import type { UniversalServerResponse } from "@connectrpc/connect/protocol";
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { GatewayLogController, observeRequests, requestIdOf } from "./edge/observe-requests.js";
import { requestLoggerFactory } from "./edge/request-logger.js";
import { metricsRoutes } from "./routes/metrics-routes.js";
import type { GatewayMetrics, RequestTracing } from "./observability.js";
import type { EdgeLimits } from "../../config/config.js";
import type { CoreClients, HeaderCheck, InlineStaging, Readiness, ValidationLimits } from "../../core/index.js";
import { BodyBudget, type UploadSlots } from "../upload-slots.js";
import { bodyGuard, hasBody, lingerUntilDiscarded, refuseBody } from "./edge/body-guard.js";
import { clientErrorHandler, frameworkErrors, MAX_PARAM_LENGTH } from "./edge/client-errors.js";
import { limitConnections } from "../connection-limits.js";
import { limitPipelining } from "./edge/pipelining.js";
import { corsRoutes } from "./edge/cors.js";
import { clientOfRequest } from "../client-address.js";
import { connectRoutes, unknownRpcAnswer, type ConnectWire } from "../rpc/connect-routes.js";
import { forwardedServices } from "../rpc/forwarding.js";
import { replyDelivery } from "./call-options.js";
import { httpErrorOf, replyWithError, routeNotFound, sendError, toHttpError } from "./error-replies.js";
import { openApi } from "./openapi.js";
import { useRequestValidators } from "./schemas/validation.js";
import { adminRoutes } from "./routes/admin-routes.js";
import { fileRoutes } from "./routes/file-routes.js";
import { healthRoutes } from "./routes/health-routes.js";
import { jobsRoutes } from "./routes/jobs-routes.js";
import { moneyRoutes } from "./routes/money-routes.js";
import { panelRoutes } from "./routes/panel-routes.js";
import { VENDOR_PREFIXES, vendorRoutes } from "./routes/vendor-routes.js";
import { OPENAI_PREFIX, openAiRoutes } from "./routes/openai-routes.js";

export interface GatewayOptions {
  /** The process's one logger (pino); Fastify's request lines go through it, with `request_id`. */
  readonly logger: FastifyBaseLogger;
  /** The gateway counts its requests there and serves GET /metrics. */
  readonly metrics: GatewayMetrics;
  /** Absent: no spans; present, each request is a server span, continuing an incoming traceparent. */
  readonly tracing?: RequestTracing;
  /** The gate in front of every route and /readyz. */
  readonly readiness: Readiness;
  readonly edge: EdgeLimits;
  /** Body limit of the routes that take inline input images (see generationBodyBytes). */
  readonly generationBodyBytes: number;
  /** Checks a call's credentials from its headers, before its body is read. */
  readonly headerCheck: HeaderCheck;
  /** The process's large-upload slots (shared with the core's port). */
  readonly uploadSlots: UploadSlots;
  /** MAX_BODY_MEMORY, one budget for both ports (without it, the gateway's own). */
  readonly bodyBudget?: BodyBudget;
  /** Validation limits the gateway checks on raw JSON before converting it (metadata). */
  readonly limits: ValidationLimits;
  /** The core's staging of inline images, when the core runs in this process (undefined in front of a remote core). */
  readonly staging: () => InlineStaging | undefined;
  /** CORS_ORIGINS: none, no CORS headers at all. */
  readonly corsOrigins?: readonly string[];
  /** Where the built web panel is (default panel/dist). */
  readonly panelDir?: string;
  /** PUBLIC_BASE_URL: when it is https, the panel's session cookie is Secure on every answer. */
  readonly publicBaseUrl?: string;
  /** TRUST_PROXY: the proxies whose X-Forwarded-* are believed; connection caps still count the peer. */
  readonly trustProxy?: boolean | readonly string[];
  /** SSE_KEEPALIVE (default 15 s). */
  readonly sseKeepAliveMs?: number;
}

/** How often Node looks for requests past HTTP_HEADERS_TIMEOUT / HTTP_REQUEST_TIMEOUT (its default is 30 s). */
const checkingIntervalMs = (headersTimeoutMs: number) => Math.min(1_000, Math.max(50, Math.floor(headersTimeoutMs / 4)));

/** The REST/SSE edge, not yet listening: it only translates, and bounds what a client may hold; every rule lives in the core. */
export async function buildGateway(core: CoreClients, options: GatewayOptions): Promise<FastifyInstance> {
  const { edge } = options;
  const headersTimeoutMs = Math.min(edge.headersTimeoutMs, edge.requestTimeoutMs);
  const app = Fastify({
    // Result links carry their signature in the query, vendor calls may carry `?key=`: logs keep the path only.
    loggerInstance: options.logger.child({}, {
      serializers: { req: (request: { method: string; url: string; ip: string }) => ({ method: request.method, url: request.url.split("?")[0], remoteAddress: request.ip }) },
    }) as FastifyBaseLogger,
    logController: new GatewayLogController(),
    childLoggerFactory: requestLoggerFactory,
    genReqId: requestIdOf,
    // Idle keep-alive sockets must not hold up shutdown.
    forceCloseConnections: true,
    return503OnClosing: true,
    bodyLimit: edge.maxBodyBytes,
    // The server Fastify would make, with each connection's requests handed over at most MAX_PIPELINED_REQUESTS at once.
    serverFactory: (handler) => {
      const server = createServer(
        { headersTimeout: headersTimeoutMs, requestTimeout: edge.requestTimeoutMs, connectionsCheckingInterval: checkingIntervalMs(headersTimeoutMs) },
        limitPipelining(edge.maxPipelinedRequests, handler),
      );
      server.keepAliveTimeout = edge.keepAliveTimeoutMs;
      server.setTimeout(edge.idleTimeoutMs);
      return server;
    },
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors,
    clientErrorHandler,
    trustProxy: typeof options.trustProxy === "object" ? [...options.trustProxy] : (options.trustProxy ?? false),
  });
  limitConnections(app.server, edge, app.log);
  observeRequests(app, options.metrics, options.tracing);

  // `Expect: 100-continue`: the client is told to send its body only once the route's checks passed (preParsing
  // runs after every onRequest hook); a refused client never sends it. Node would otherwise say 100 at once.
  app.server.on("checkContinue", (request, response) => app.server.emit("request", request, response));
  app.addHook("preParsing", (request, reply, payload, done) => {
    if (request.headers.expect?.toLowerCase() === "100-continue" && !reply.raw.headersSent) reply.raw.writeContinue();
    done(null, payload);
  });
  // Until the answer starts, a quiet connection is this service at work (the core bounds that time: UPSTREAM_TIMEOUT,
  // TEXT_CALL_LIMIT), not the client's idling: the idle timeout waits until the answer is being sent.
  app.addHook("preHandler", (request, _reply, done) => {
    request.raw.socket?.setTimeout(0);
    done();
  });
  app.addHook("onSend", (request, _reply, payload, done) => {
    request.raw.socket?.setTimeout(edge.idleTimeoutMs);
    done(null, payload);
  });

  app.setErrorHandler(replyWithError);
  app.setNotFoundHandler((request, reply) => answerUnknownRpc(request, reply) ?? sendError(reply, toHttpError(routeNotFound(request))));

  // What the REST routes' body guard and the RPC routes' admission check with: the same credentials, slots and memory.
  const admission = { headerCheck: options.headerCheck, uploadSlots: options.uploadSlots, bodyBudget: options.bodyBudget ?? new BodyBudget(edge.maxBodyMemory), edge };
  const guard = bodyGuard({ ...admission, generationBodyBytes: options.generationBodyBytes });
  // CORS first, not encapsulated: preflights are answered before any gate, and every answer carries its CORS headers.
  // Before the OpenAPI plugin: its catch-all OPTIONS route answers preflights and is no operation of the API.
  await corsRoutes(options.corsOrigins ?? [])(app);
  // Route schemas validate requests (bodies never coerced) and describe every route in GET /openapi.json and /docs.
  useRequestValidators(app);
  await openApi(app);
  // Connect and gRPC-Web (gRPC needs HTTP/2): before the readiness gate, which answers in the REST shape; these have their own.
  await app.register(connectRoutes({
    settings: { ...admission, readiness: options.readiness },
    limits: options.limits,
    services: forwardedServices(core),
    wire: gatewayWire(edge.idleTimeoutMs),
    log: (message, error) => app.log.error({ err: error }, message),
  }));
  // Not encapsulated: the gate must stand in front of every route, the 404 handler included.
  await healthRoutes(options.readiness)(app);
  await app.register(metricsRoutes(options.metrics));
  // Bodies no route reads (after the readiness gate, so 503 comes first): an unknown path is answered 404 before its
  // body is read (Fastify would read it), a GET's or HEAD's body is discarded within the refusals' bounds once answered.
  app.addHook("onRequest", async (request, reply) => {
    if (!hasBody(request)) return;
    if (request.is404) return answerUnknownRpc(request, reply) ?? refuseBody(request, reply, routeNotFound(request));
    if (request.method === "GET" || request.method === "HEAD") lingerUntilDiscarded(request, { answered: reply });
  });
  await app.register(jobsRoutes(core, guard, {
    rules: { metadata: options.limits.metadata },
    images: { staging: options.staging, streamAbove: edge.largeUploadBytes, maxOtherBytes: edge.maxBodyBytes },
    sseKeepAliveMs: options.sseKeepAliveMs ?? 15_000,
  }));
  await app.register(moneyRoutes(core, guard));
  await app.register(adminRoutes(core, guard));
  await app.register(fileRoutes(core));
  await app.register(panelRoutes(core, { distDir: options.panelDir, httpsOrigin: options.publicBaseUrl?.startsWith("https://") ?? false }));
  for (const prefix of VENDOR_PREFIXES) await app.register(vendorRoutes(core, guard), { prefix });
  await app.register(openAiRoutes(core, guard), { prefix: OPENAI_PREFIX });
  return app;
}

/** A call of an RPC this port does not serve, answered in the caller's protocol (unknownRpcAnswer), its body unread; undefined for a request that is no RPC. */
function answerUnknownRpc(request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined {
  const answer = unknownRpcAnswer(request);
  if (!answer) return undefined;
  lingerUntilDiscarded(request);
  return reply.code(answer.status).headers(answer.headers).send(answer.body);
}

/** A short answer of Connect's (a refusal: no trailers on HTTP/1.1), sent whole through the reply, so its CORS headers go with it. */
async function sendWhole(reply: FastifyReply, response: UniversalServerResponse, refusal: ConnectError): Promise<FastifyReply> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of response.body ?? []) chunks.push(chunk);
  const { retryAfterSeconds } = httpErrorOf(refusal);
  if (retryAfterSeconds) reply.header("retry-after", String(retryAfterSeconds));
  reply.code(response.status);
  new Headers(response.header).forEach((value, name) => {
    if (name !== "content-length") reply.header(name, value);
  });
  return reply.send(Buffer.concat(chunks));
}

/** HTTP/1.1: what a refused or abandoned call still sends is discarded within bounds; the idle timeout runs again once answering. */
function gatewayWire(idleTimeoutMs: number): ConnectWire {
  return {
    grpc: false,
    callerOf: clientOfRequest,
    abandonBody: (request, reply) => lingerUntilDiscarded(request, reply.raw.headersSent ? "now" : { answered: reply }),
    answering: (request) => request.raw.socket?.setTimeout(idleTimeoutMs),
    delivery: (_request, reply) => replyDelivery(reply),
    sendRefusal: sendWhole,
    watchClient: (request, reply) =>
      reply.raw.once("close", () => {
        if (!reply.raw.writableFinished) request.log.debug({ path: request.url.split("?")[0] }, "client went away");
      }),
  };
}
