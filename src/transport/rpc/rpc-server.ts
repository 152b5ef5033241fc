import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { AdminService } from "../../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../../gen/generation/v1/text_service_pb.js";
import type { Core } from "../../runtime/core.js";

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
 * The core on an HTTP/2 cleartext port: gRPC, gRPC-Web and Connect, so plain
 * gRPC clients (grpc-js, grpcurl) and Connect clients both work.
 */
export async function listenRpc(core: Core, host: string, port: number, log: (message: string, error: unknown) => void) {
  const handler = connectNodeAdapter({
    interceptors: [logUnexpected(log)],
    readMaxBytes: 320 * 1024 * 1024,
    routes: (router) => {
      router.service(GenerationService, core.services.generation);
      router.service(TextService, core.services.text);
      router.service(AdminService, core.services.admin);
      router.service(FileService, core.services.files);
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
        server.close(() => resolve());
        for (const session of sessions) session.close();
      }),
  };
}
