import { setMaxListeners } from "node:events";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { universalResponseToNodeResponse } from "@connectrpc/connect-node";
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import { Health } from "../../../gen/grpc/health/v1/health_pb.js";
import { DEFAULT_EDGE_LIMITS, type EdgeLimits } from "../../config/config.js";
import { type AnswerDelivery, type CoreClients, createHealthService, DEFAULT_LIMITS, type HeaderCheck, type Readiness, type ValidationLimits } from "../../core/index.js";
import { BodyBudget, UploadSlots } from "../upload-slots.js";
import { clientOfCall, FORWARDED_CLIENT_HEADER } from "../client-address.js";
import { serverTiming } from "../server-timing.js";
import { guardedListener, type DebugLog } from "../connection-limits.js";
import { connectRoutes, unknownRpcAnswer, type ConnectWire } from "./connect-routes.js";
import { readinessGate, serverTimingOnAnswers } from "./edge-interceptors.js";
import { forwardedServices } from "./forwarding.js";
import { reflectionServices } from "./reflection-service.js";

/** The edge settings of the core port; `listenRpc` without them uses the configuration's defaults. */
export interface RpcEdgeOptions {
  readonly edge: EdgeLimits;
  readonly limits: ValidationLimits;
  /** The process's large-upload slots, shared with the gateway; a core port of its own makes its own. */
  readonly uploads?: Pick<UploadSlots, "tryTake">;
  /** The process's body memory (MAX_BODY_MEMORY), shared with the gateway; a core port of its own makes its own from `edge.maxBodyMemory`. */
  readonly bodyBudget?: BodyBudget;
  /** Debug lines of the edge (a client that went away, a connection over its client's cap), never a stack. Default: none. */
  readonly debugLog?: DebugLog;
}

/** The configuration's defaults (HTTP_*_TIMEOUT, MAX_*: its schema's), for callers that pass no configuration. */
export const DEFAULT_RPC_EDGE: RpcEdgeOptions = { edge: DEFAULT_EDGE_LIMITS, limits: DEFAULT_LIMITS };

/** What the core port serves and checks with. */
export interface RpcCore {
  /** Every call is forwarded to them (the core's interceptors run there). */
  readonly clients: CoreClients;
  readonly headerCheck: HeaderCheck;
  /** URL_SIGNING_SECRET: a remote gateway signs the client it forwards a call for (x-gateway-client) with it. */
  readonly urlSigningSecret: Buffer;
}

/** Undelivered: the stream closed (a reset, the connection gone) before the answer was written whole. */
function streamDelivery(stream: http2.ServerHttp2Stream): AnswerDelivery {
  return {
    onUndelivered(undelivered) {
      if (stream.writableFinished) return;
      if (stream.closed || stream.destroyed) undelivered();
      else stream.once("close", () => stream.writableFinished || undelivered());
    },
  };
}

/** Once the answer is out, a request side still open is reset NO_ERROR (RFC 9113, 8.1) so the sender stops; after its trailers. */
function closeRequestSide(request: http2.Http2ServerRequest): void {
  const stream = request.stream;
  const close = () => {
    if (request.readableEnded || stream.closed || stream.destroyed) return;
    request.resume();
    stream.close(http2.constants.NGHTTP2_NO_ERROR);
  };
  if (stream.writableEnded) close();
  else stream.once("wantTrailers", () => setImmediate(close));
}

/** HTTP/2: the caller by its session (or the client its gateway signed for); the request timeout kept here; a call abandoned is closed. */
function coreWire(urlSigningSecret: Buffer, requestTimeoutMs: number, debug: DebugLog): ConnectWire {
  const raw = (request: FastifyRequest) => request.raw as unknown as http2.Http2ServerRequest;
  return {
    grpc: true,
    requestTimeoutMs,
    callerOf: (request) => clientOfCall(raw(request).stream.session, request.headers[FORWARDED_CLIENT_HEADER], urlSigningSecret),
    abandonBody: (request) => closeRequestSide(raw(request)),
    delivery: (request) => streamDelivery(raw(request).stream),
    sendRefusal: async (reply: FastifyReply, response, refusal) => {
      reply.hijack();
      await universalResponseToNodeResponse(response, reply.raw as never);
      return refusal;
    },
    // A refusal is this service's time too (the answers' Server-Timing: serverTimingOnAnswers).
    refusing: (refusal, elapsedMs) => refusal.metadata.set("server-timing", serverTiming(elapsedMs, undefined)),
    // A client that reset the stream (a cancel, a passed deadline) or its connection: one debug line per call.
    // The edge's own resets (closeRequestSide) are NO_ERROR, after the answer.
    watchClient: (request) => {
      const stream = raw(request).stream;
      stream.once("close", () => {
        if (raw(request).aborted || stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) {
          debug("client went away", { path: request.url.split("?", 1)[0], rstCode: stream.rstCode });
        }
      });
    },
  };
}

/** The core on an HTTP/2 cleartext port (gRPC, gRPC-Web, Connect), with health and reflection, behind the edge. */
export async function listenRpc(
  core: RpcCore,
  host: string,
  port: number,
  log: (message: string, error: unknown) => void,
  readiness: Readiness,
  options: RpcEdgeOptions = DEFAULT_RPC_EDGE,
) {
  const { edge } = options;
  const debug = options.debugLog ?? (() => {});
  const services = forwardedServices(core.clients, true);
  // Ends open health Watch calls on close; they would otherwise hold the HTTP/2 sessions open.
  const closing = new AbortController();
  // One listener per open Watch: any number of them is expected (no MaxListenersExceededWarning).
  setMaxListeners(0, closing.signal);
  const health = createHealthService(readiness, services.map(([service]) => service.typeName), { shutdownSignal: closing.signal });
  services.push([Health, health]);
  services.push(...reflectionServices(services.map(([service]) => service)));

  // The server is this module's: its connections come from guardedListener, which bounds them before HTTP/2 sees them.
  const server = http2.createServer({ settings: { maxConcurrentStreams: edge.maxConcurrentStreams } });
  const app = Fastify({
    serverFactory: (handler) => server.on("request", handler) as never,
    http2: true,
    logger: false,
    return503OnClosing: false,
  });
  await app.register(connectRoutes({
    settings: {
      readiness,
      headerCheck: core.headerCheck,
      edge,
      uploadSlots: options.uploads ?? new UploadSlots(edge.maxConcurrentLargeUploads),
      bodyBudget: options.bodyBudget ?? new BodyBudget(edge.maxBodyMemory),
    },
    limits: options.limits,
    services,
    interceptors: [serverTimingOnAnswers(), readinessGate(readiness)],
    wire: coreWire(core.urlSigningSecret, edge.requestTimeoutMs, debug),
    log,
  }));
  // Any other path, in the caller's protocol; its body is never read.
  app.setNotFoundHandler((request, reply) => {
    const answer = unknownRpcAnswer(request, true)!;
    reply.hijack();
    const stream = (request.raw as unknown as http2.Http2ServerRequest).stream;
    const length = answer.body ? { "content-length": String(answer.body.byteLength) } : {};
    stream.respond({ ":status": answer.status, ...answer.headers, ...length }, { endStream: answer.body === undefined });
    if (answer.body) stream.end(answer.body);
  });
  await app.ready();
  const listener = guardedListener(server, edge, debug);
  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen(port, host, () => resolve());
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  return {
    port: (listener.address() as AddressInfo).port,
    close: async () => {
      closing.abort();
      await new Promise<void>((resolve) => {
        listener.close(() => resolve());
        for (const session of sessions) session.close();
      });
      await app.close();
    },
  };
}
