import type { UniversalServerResponse } from "@connectrpc/connect/protocol";
import type { ConnectError } from "@connectrpc/connect";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { CoreClients, ValidationLimits } from "../../core/index.js";
import { clientOfRequest } from "../client-address.js";
import { connectRoutes, type ConnectWire } from "../rpc/connect-routes.js";
import { forwardedServices } from "../rpc/forwarding.js";
import type { RpcAdmissionSettings } from "../rpc/rpc-admission.js";
import { replyDelivery } from "./call-options.js";
import { httpErrorOf } from "./connect-errors.js";
import { lingerUntilDiscarded } from "./edge/body-guard.js";

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
 * The core's services on the gateway port in Connect and gRPC-Web over HTTP/1.1 (gRPC needs HTTP/2's trailers), behind
 * the core port's edge; registered before the REST readiness gate, as their 503 is in the caller's protocol.
 */
export function gatewayRpcRoutes(core: CoreClients, settings: RpcAdmissionSettings, limits: ValidationLimits) {
  return async (scope: FastifyInstance) => {
    await scope.register(connectRoutes({
      settings,
      limits,
      services: forwardedServices(core),
      wire: gatewayWire(settings.edge.idleTimeoutMs),
      log: (message, error) => scope.log.error({ err: error }, message),
    }));
  };
}
