import { setMaxListeners } from "node:events";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { DescService } from "@bufbuild/protobuf";
import { createConnectRouter } from "@connectrpc/connect";
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
import { type CoreClients, DEFAULT_LIMITS, type HeaderCheck, type Readiness, type ValidationLimits } from "../../core/index.js";
import { BodyBudget, UploadSlots } from "../upload-slots.js";
import { clientOfCall } from "../client-address.js";
import { guardedListener, type DebugLog } from "./connection-guard.js";
import { createEdgeHandler } from "./edge-handler.js";
import { answerFailures, readinessGate, serverTimingOnAnswers } from "./edge-interceptors.js";
import { forwarding } from "./forwarding.js";
import { markInvoked } from "./wire-protocol.js";
import type { UploadSlotsLike } from "./call-guard.js";
import { createHealthService } from "./health-service.js";
import { methodPolicies } from "./method-policy.js";
import { createReflectionServices } from "./reflection-service.js";

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

/** What the core port serves and checks with. */
export interface RpcCore {
  /** The core's clients: every call is forwarded to them (the core's interceptors run there). */
  readonly clients: CoreClients;
  /** Credentials from headers alone, checked before a message is read. */
  readonly headerCheck: HeaderCheck;
  /** URL_SIGNING_SECRET: a remote gateway signs the client it forwards a call for (x-gateway-client) with it. */
  readonly urlSigningSecret: Buffer;
}

/**
 * The core on an HTTP/2 cleartext port: gRPC, gRPC-Web and Connect, all
 * served by Connect's router, so plain gRPC clients (grpc-js, grpcurl,
 * grpc-health-probe) and Connect clients all work. `grpc.health.v1.Health`
 * reports `readiness`, which also gates every other RPC but reflection's:
 * `grpc.reflection.v1` and `v1alpha` describe every served service, so
 * grpcurl and buf curl need no .proto files. The edge (createEdgeHandler,
 * guardedListener) bounds what a client may hold: connections, sessions,
 * streams, time and message sizes, and checks credentials before a message is read.
 */
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
  const forwarded: [DescService, () => object][] = [
    [GenerationService, () => core.clients.generation],
    [TextService, () => core.clients.text],
    [AdminService, () => core.clients.admin],
    [AccountService, () => core.clients.account],
    [FileService, () => core.clients.files],
  ];
  // Ends open health Watch calls on close; they would otherwise hold the HTTP/2 sessions open.
  const closing = new AbortController();
  // One listener per open Watch: any number of them is expected (no MaxListenersExceededWarning).
  setMaxListeners(0, closing.signal);
  const health = createHealthService(readiness, forwarded.map(([service]) => service.typeName), { shutdownSignal: closing.signal });
  const policies = methodPolicies(options.limits, edge.maxBodyBytes);
  const router = createConnectRouter({
    interceptors: [serverTimingOnAnswers(), answerFailures(log), readinessGate(readiness), markInvoked],
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  const implementations: [DescService, object][] = forwarded.map(([service, clientOf]) => [service, forwarding(service, clientOf)]);
  implementations.push([Health, health]);
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
    callerOf: (session: http2.Http2Session | undefined, headers: Headers) => clientOfCall(session, headers, core.urlSigningSecret),
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
