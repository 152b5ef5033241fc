import type { DescService } from "@bufbuild/protobuf";
import type { UniversalServerResponse } from "@connectrpc/connect/protocol";
import type { ConnectError } from "@connectrpc/connect";
import type { FastifyInstance, FastifyReply } from "fastify";
import { AccountService } from "../../../gen/generation/v1/account_service_pb.js";
import { AdminService } from "../../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../../gen/generation/v1/text_service_pb.js";
import type { CoreClients, ValidationLimits } from "../../core/index.js";
import { clientOfRequest } from "../client-address.js";
import { connectRoutes, type ConnectWire } from "../rpc/connect-routes.js";
import { forwarding } from "../rpc/forwarding.js";
import type { RpcAdmissionSettings } from "../rpc/rpc-admission.js";
import { replyDelivery } from "./call-options.js";
import { httpErrorOf } from "./connect-errors.js";
import { lingerUntilDiscarded } from "./edge/body-guard.js";

/**
 * The services a browser (or any HTTP/1.1 client) calls on the gateway port,
 * each forwarded to the core client of the same interface. Health and
 * reflection stay on the core port: /readyz is this port's probe, and
 * reflection is a bidirectional stream that needs HTTP/2 (grpcurl, buf curl).
 */
const FORWARDED: readonly (readonly [DescService, (core: CoreClients) => object])[] = [
  [GenerationService, (core) => core.generation],
  [TextService, (core) => core.text],
  [AdminService, (core) => core.admin],
  [AccountService, (core) => core.account],
  [FileService, (core) => core.files],
];

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

/**
 * GenerationService, TextService, AdminService, AccountService and
 * FileService on the gateway port, in Connect and gRPC-Web over HTTP/1.1,
 * for browsers and clients without HTTP/2; gRPC itself needs HTTP/2 trailers
 * and stays on the core port. Each call is forwarded to `core`, so the rules
 * and answers are the core port's, behind the same edge (connectRoutes).
 * Registered before the REST readiness gate, which answers in the REST
 * shape: these routes' own gate answers 503 as Connect's `unavailable` or a
 * gRPC-Web status.
 */
export function gatewayRpcRoutes(core: CoreClients, settings: RpcAdmissionSettings, limits: ValidationLimits) {
  return async (scope: FastifyInstance) => {
    await scope.register(connectRoutes({
      settings,
      limits,
      services: FORWARDED.map(([service, clientOf]) => [service, forwarding(service, () => clientOf(core))] as const),
      wire: gatewayWire(settings.edge.idleTimeoutMs),
      log: (message, error) => scope.log.error({ err: error }, message),
    }));
  };
}
