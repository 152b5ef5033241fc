import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createConnectRouter, type Interceptor } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { AdminService } from "../../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../../gen/generation/v1/text_service_pb.js";
import { Health } from "../../../gen/grpc/health/v1/health_pb.js";
import type { EdgeLimits } from "../../config/config.js";
import type { Readiness } from "../../core/health/readiness.js";
import { DEFAULT_LIMITS, MIB, type ValidationLimits } from "../../domain/validation/limits.js";
import type { Core } from "../../runtime/core.js";
import { UploadSlots } from "../upload-slots.js";
import { guardedListener } from "./connection-guard.js";
import { createEdgeHandler } from "./edge-handler.js";
import type { UploadSlotsLike } from "./call-guard.js";
import { createHealthService, HEALTH_SERVICE_NAME } from "./health-service.js";
import { methodPolicies } from "./method-policy.js";
import { notServing } from "./refusals.js";

/** Logs handler crashes through our logger instead of Connect's console.error. */
function logUnexpected(log: (message: string, error: unknown) => void): Interceptor {
  return (next) => async (request) => {
    try {
      return await next(request);
    } catch (error) {
      // Refusals (invalid, unauthenticated, …) are answers; only crashes are worth a log line.
      const crash = !(error instanceof ConnectError) || error.code === Code.Internal || error.code === Code.Unknown;
      if (crash) log(`${request.method.name} failed`, error);
      throw error;
    }
  };
}

/**
 * Refuses every RPC but the health service's while the process cannot serve
 * (starting, or a dependency requests need is down): UNAVAILABLE with the
 * usual ErrorDetail (service_unavailable, 503, retry-after). The edge refuses
 * such calls before reading their message; this gate covers the rest.
 */
function readinessGate(readiness: Readiness): Interceptor {
  return (next) => async (request) => {
    if (!readiness.current.serving && request.service.typeName !== HEALTH_SERVICE_NAME) throw notServing(readiness);
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
}

/** The defaults of src/config/config.ts (HTTP_*_TIMEOUT, MAX_*), for callers that pass no configuration. */
export const DEFAULT_RPC_EDGE: RpcEdgeOptions = {
  edge: {
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 60_000,
    idleTimeoutMs: 30_000,
    keepAliveTimeoutMs: 5_000,
    maxConnections: 10_000,
    maxConnectionsPerClient: 256,
    maxBodyBytes: 1 * MIB,
    largeUploadBytes: 1 * MIB,
    maxConcurrentLargeUploads: 4,
    maxConcurrentStreams: 100,
    maxBodyMemory: 512 * MIB,
  },
  limits: DEFAULT_LIMITS,
};

const UPLOAD_RETRY_AFTER_SECONDS = 2;

/**
 * The core on an HTTP/2 cleartext port: gRPC, gRPC-Web and Connect, so plain
 * gRPC clients (grpc-js, grpcurl, grpc-health-probe) and Connect clients all
 * work. `grpc.health.v1.Health` reports `readiness`, which also gates every
 * other RPC. The edge (createEdgeHandler, guardConnections) bounds what a
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
  const served = [GenerationService, TextService, AdminService, FileService].map((service) => service.typeName);
  // Ends open health Watch calls on close; they would otherwise hold the HTTP/2 sessions open.
  const closing = new AbortController();
  const health = createHealthService(readiness, served, { shutdownSignal: closing.signal });
  const policies = methodPolicies(options.limits, edge.maxBodyBytes);
  const router = createConnectRouter({
    interceptors: [logUnexpected(log), readinessGate(readiness)],
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  const implementations: [DescService, object][] = [
    [GenerationService, core.services.generation],
    [TextService, core.services.text],
    [AdminService, core.services.admin],
    [FileService, core.services.files],
    [Health, health],
  ];
  for (const [service, implementation] of implementations) {
    for (const method of service.methods) {
      // The edge refuses a message over its method's limit from its length prefix; Connect applies the same
      // limit to the message once decompressed (a small compressed message cannot grow past it).
      const { maxMessageBytes } = policies.get(`/${service.typeName}/${method.name}`)!;
      const impl = (implementation as Record<string, (...args: never[]) => unknown>)[method.localName]!.bind(implementation);
      router.rpc(method, impl as never, { readMaxBytes: maxMessageBytes });
    }
  }
  const handler = createEdgeHandler(router, policies, {
    readiness,
    headerCheck: core.headerCheck,
    requestTimeoutMs: edge.requestTimeoutMs,
    largeUploadBytes: edge.largeUploadBytes,
    uploads: options.uploads ?? new UploadSlots(edge.maxConcurrentLargeUploads),
    uploadRetryAfterSeconds: options.uploadRetryAfterSeconds ?? UPLOAD_RETRY_AFTER_SECONDS,
    log,
  });
  const server = http2.createServer({ settings: { maxConcurrentStreams: edge.maxConcurrentStreams } }, handler);
  const listener = guardedListener(server, edge);
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
