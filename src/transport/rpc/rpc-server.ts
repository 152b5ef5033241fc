import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { AdminService } from "../../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../../gen/generation/v1/text_service_pb.js";
import { Health } from "../../../gen/grpc/health/v1/health_pb.js";
import type { Readiness } from "../../core/health/readiness.js";
import { toConnectError } from "../../core/errors/rpc-errors.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import type { Core } from "../../runtime/core.js";
import { createHealthService, HEALTH_SERVICE_NAME } from "./health-service.js";

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
 * usual ErrorDetail (service_unavailable, 503, retry-after).
 */
function readinessGate(readiness: Readiness): Interceptor {
  return (next) => async (request) => {
    const report = readiness.current;
    if (!report.serving && request.service.typeName !== HEALTH_SERVICE_NAME) {
      throw toConnectError(
        new DomainError("unavailable", "service_unavailable", report.reason ?? "service unavailable", {}, readiness.retryAfterSeconds),
      );
    }
    return next(request);
  };
}

/**
 * The core on an HTTP/2 cleartext port: gRPC, gRPC-Web and Connect, so plain
 * gRPC clients (grpc-js, grpcurl, grpc-health-probe) and Connect clients all
 * work. `grpc.health.v1.Health` reports `readiness`, which also gates every
 * other RPC.
 */
export async function listenRpc(
  core: Core,
  host: string,
  port: number,
  log: (message: string, error: unknown) => void,
  readiness: Readiness,
) {
  const served = [GenerationService, TextService, AdminService, FileService].map((service) => service.typeName);
  // Ends open health Watch calls on close; they would otherwise hold the HTTP/2 sessions open.
  const closing = new AbortController();
  const health = createHealthService(readiness, served, { shutdownSignal: closing.signal });
  const handler = connectNodeAdapter({
    interceptors: [logUnexpected(log), readinessGate(readiness)],
    readMaxBytes: 320 * 1024 * 1024,
    routes: (router) => {
      router.service(GenerationService, core.services.generation);
      router.service(TextService, core.services.text);
      router.service(AdminService, core.services.admin);
      router.service(FileService, core.services.files);
      router.service(Health, health);
    },
  });
  const server = http2.createServer(handler);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        closing.abort();
        server.close(() => resolve());
        for (const session of sessions) session.close();
      }),
  };
}
