import { setMaxListeners } from "node:events";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { DescService } from "@bufbuild/protobuf";
import { createConnectRouter, type Interceptor } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { AccountService } from "../../../gen/generation/v1/account_service_pb.js";
import { AdminService } from "../../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../../gen/generation/v1/text_service_pb.js";
import { Health } from "../../../gen/grpc/health/v1/health_pb.js";
import { ServerReflection as ReflectionV1 } from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ReflectionV1alpha } from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { DEFAULT_EDGE_LIMITS, type EdgeLimits } from "../../config/config.js";
import type { Readiness } from "../../core/health/readiness.js";
import { DEFAULT_LIMITS, type ValidationLimits } from "../../domain/validation/limits.js";
import type { Core } from "../../runtime/core.js";
import { BodyBudget, UploadSlots } from "../upload-slots.js";
import { clientOfCall } from "../client-address.js";
import { PROVIDER_METHODS, UPSTREAM_TIME, type UpstreamTime } from "../../core/text/upstream-time.js";
import { SteppedStream } from "../../shared/stream-step.js";
import { serverTiming } from "../server-timing.js";
import { guardedListener, type DebugLog } from "./connection-guard.js";
import { settleFailure, wireError } from "./call-failures.js";
import { createEdgeHandler, splitStreams } from "./edge-handler.js";
import { GrpcJsUnaryCalls } from "./grpc-js-unary.js";
import type { UploadSlotsLike } from "./call-guard.js";
import { createHealthService } from "./health-service.js";
import { methodPolicies, SERVED_WHILE_NOT_READY } from "./method-policy.js";
import { createReflectionServices } from "./reflection-service.js";
import { notServing } from "./refusals.js";

/**
 * How a handler's failure leaves (unary calls, and streams that fail
 * midway). A call its client ended (a cancel, a passed deadline) is answered
 * with the signal's reason, DEADLINE_EXCEEDED or CANCELED, whatever the
 * aborted store or upstream threw (an AbortError would otherwise become
 * Connect's INTERNAL: a 500 for the client's own deadline); it is no crash
 * (the edge logs it once, at debug: createEdgeHandler). Crashes are logged
 * through our logger instead of Connect's console.error; refusals (invalid,
 * unauthenticated, …) are answers and not logged.
 */
function answerFailures(log: (message: string, error: unknown) => void): Interceptor {
  const settle = (signal: AbortSignal, method: string, error: unknown) => settleFailure(signal, method, error, log);
  return (next) => async (request) => {
    let response;
    try {
      response = await next(request);
    } catch (error) {
      throw settle(request.signal, request.method.name, error);
    }
    if (!response.stream) return response;
    return { ...response, message: settlingFailures(response.message, (error) => settle(request.signal, request.method.name, error)) };
  };
}

/** A stream's messages as they come; a failure midway is settled (answerFailures), then passed on. */
async function* settlingFailures<T>(messages: AsyncIterable<T>, settle: (error: unknown) => unknown): AsyncGenerator<T> {
  try {
    yield* messages;
  } catch (error) {
    throw settle(error);
  }
}

/**
 * Server-Timing on the answers Connect serves on the core port (the Connect
 * and gRPC-Web protocols, and gRPC's streaming methods; grpc-js's unary calls
 * set theirs): this service's own time and, for a text call, the provider's,
 * as on the REST gateway. In the headers of a unary answer and of a failure;
 * in the trailers of a stream, which then covers the whole stream.
 */
function serverTimingOnAnswers(): Interceptor {
  return (next) => async (request) => {
    const started = performance.now();
    const upstream: UpstreamTime | undefined = PROVIDER_METHODS.has(request.method) ? {} : undefined;
    if (upstream) request.contextValues.set(UPSTREAM_TIME, upstream);
    const timing = () => serverTiming(performance.now() - started, upstream?.upstreamMs);
    const failed = (error: unknown) => {
      const failure = wireError(error);
      failure.metadata.set("server-timing", timing());
      return failure;
    };
    let response;
    try {
      response = await next(request);
    } catch (error) {
      throw failed(error);
    }
    if (!response.stream) {
      response.header.set("server-timing", timing());
      return response;
    }
    const trailer = response.trailer;
    return {
      ...response,
      message: new SteppedStream<unknown, unknown>({
        open: () => response.message,
        map: (message) => message,
        ended: (outcome) => {
          if (outcome === "done") trailer.set("server-timing", timing());
        },
        failure: failed,
      }) as typeof response.message,
    };
  };
}

/**
 * Refuses every RPC but health's and reflection's while the process cannot serve
 * (starting, or a dependency requests need is down): UNAVAILABLE with the
 * usual ErrorDetail (service_unavailable, 503, retry-after). The edge refuses
 * such calls before reading their message; this gate covers the rest.
 */
function readinessGate(readiness: Readiness): Interceptor {
  return (next) => async (request) => {
    if (!readiness.current.serving && !SERVED_WHILE_NOT_READY.has(request.service.typeName)) throw notServing(readiness);
    return next(request);
  };
}

/** The edge settings of the core port; `listenRpc` without them uses the configuration's defaults. */
export interface RpcEdgeOptions {
  readonly edge: EdgeLimits;
  /** Prompt, metadata and input-image limits: the image-carrying methods' message limit derives from them. */
  readonly limits: ValidationLimits;
  /** The process's large-upload slots, shared with the gateway; a core port of its own makes its own. */
  readonly uploads?: UploadSlotsLike;
  /** Retry-After of a too_many_uploads refusal (default 2 s: an upload slot frees in seconds). */
  readonly uploadRetryAfterSeconds?: number;
  /** The process's body memory (MAX_BODY_MEMORY), shared with the gateway; a core port of its own makes its own from `edge.maxBodyMemory`. */
  readonly bodyBudget?: BodyBudget;
  /** Retry-After of a server_busy refusal for want of body memory (default 1 s, as the gateway's). */
  readonly bodyMemoryRetryAfterSeconds?: number;
  /**
   * Debug lines of the edge, each a message and its facts, never a stack: a client that went away
   * (a cancel, RST_STREAM, a passed deadline), a connection over its client's cap. Default: none.
   */
  readonly debugLog?: DebugLog;
}

/** The configuration's defaults (HTTP_*_TIMEOUT, MAX_*: its schema's), for callers that pass no configuration. */
export const DEFAULT_RPC_EDGE: RpcEdgeOptions = {
  edge: DEFAULT_EDGE_LIMITS,
  limits: DEFAULT_LIMITS,
};

const UPLOAD_RETRY_AFTER_SECONDS = 2;
/** As the gateway's 503 server_busy: messages being received are usually read whole within a second. */
const BODY_MEMORY_RETRY_AFTER_SECONDS = 1;

/**
 * The core on an HTTP/2 cleartext port: gRPC, gRPC-Web and Connect, so plain
 * gRPC clients (grpc-js, grpcurl, grpc-health-probe) and Connect clients all
 * work. gRPC's unary calls are served by grpc-js, the rest by Connect
 * (splitStreams, GrpcJsUnaryCalls). `grpc.health.v1.Health` reports `readiness`, which also gates every
 * other RPC but reflection's: `grpc.reflection.v1` and `v1alpha` describe
 * every served service, so grpcurl and buf curl need no .proto files. The edge (createEdgeHandler, guardConnections) bounds what a
 * client may hold: connections, sessions, streams, time and message sizes,
 * and checks credentials before a message is read.
 */
export async function listenRpc(
  core: Core,
  host: string,
  port: number,
  log: (message: string, error: unknown) => void,
  readiness: Readiness,
  options: RpcEdgeOptions = DEFAULT_RPC_EDGE,
) {
  const { edge } = options;
  const debug = options.debugLog ?? (() => {});
  const served = [GenerationService, TextService, AdminService, AccountService, FileService].map((service) => service.typeName);
  // Ends open health Watch calls on close; they would otherwise hold the HTTP/2 sessions open.
  const closing = new AbortController();
  // One listener per open Watch: any number of them is expected (no MaxListenersExceededWarning).
  setMaxListeners(0, closing.signal);
  const health = createHealthService(readiness, served, { shutdownSignal: closing.signal });
  const policies = methodPolicies(options.limits, edge.maxBodyBytes);
  const router = createConnectRouter({
    interceptors: [serverTimingOnAnswers(), answerFailures(log), readinessGate(readiness)],
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  const implementations: [DescService, object][] = [
    [GenerationService, core.services.generation],
    [TextService, core.services.text],
    [AdminService, core.services.admin],
    [AccountService, core.services.account],
    [FileService, core.services.files],
    [Health, health],
  ];
  const reflection = createReflectionServices(implementations.map(([service]) => service));
  implementations.push([ReflectionV1, reflection.v1], [ReflectionV1alpha, reflection.v1alpha]);
  for (const [service, implementation] of implementations) {
    for (const method of service.methods) {
      // The edge refuses a message over its method's limit from its length prefix; Connect applies the same
      // limit to the message once decompressed (a small compressed message cannot grow past it).
      const { maxMessageBytes } = policies.get(`/${service.typeName}/${method.name}`)!;
      const impl = (implementation as Record<string, (...args: never[]) => unknown>)[method.localName]!.bind(implementation);
      router.rpc(method, impl as never, { readMaxBytes: maxMessageBytes });
    }
  }
  const guardSettings = {
    readiness,
    headerCheck: core.headerCheck,
    callerOf: (session: http2.Http2Session | undefined, headers: Headers) => clientOfCall(session, headers, core.deps.settingsOf.urlSigningSecret),
    requestTimeoutMs: edge.requestTimeoutMs,
    largeUploadBytes: edge.largeUploadBytes,
    uploads: options.uploads ?? new UploadSlots(edge.maxConcurrentLargeUploads),
    uploadRetryAfterSeconds: options.uploadRetryAfterSeconds ?? UPLOAD_RETRY_AFTER_SECONDS,
    bodyBudget: options.bodyBudget ?? new BodyBudget(edge.maxBodyMemory),
    bodyMemoryRetryAfterSeconds: options.bodyMemoryRetryAfterSeconds ?? BODY_MEMORY_RETRY_AFTER_SECONDS,
    log,
    debug,
  };
  const handler = createEdgeHandler(router, policies, guardSettings);
  const server = http2.createServer({ settings: { maxConcurrentStreams: edge.maxConcurrentStreams } }, handler);
  splitStreams(server, policies, new GrpcJsUnaryCalls(implementations, guardSettings), debug);
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
    close: () =>
      new Promise<void>((resolve) => {
        closing.abort();
        listener.close(() => resolve());
        for (const session of sessions) session.close();
      }),
  };
}
