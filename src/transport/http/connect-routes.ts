import type { DescService } from "@bufbuild/protobuf";
import { createContextKey, createContextValues, type ConnectRouter } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { AccountService } from "../../../gen/generation/v1/account_service_pb.js";
import { AdminService } from "../../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../../gen/generation/v1/text_service_pb.js";
import { ANSWER_DELIVERY, type AnswerDelivery, CLIENT_ADDRESS, type CoreClients, type ValidationLimits } from "../../core/index.js";
import { ANSWER_WATCHED, methodPolicies, type MethodPolicy } from "../rpc/method-policy.js";
import { replyDelivery } from "./call-options.js";
import { malformedMessage } from "../rpc/refusals.js";
import { admittedBody, CALL_PROGRESS, inspectParseFailure, markInvoked, protocolOf, type CallProgress } from "../rpc/wire-protocol.js";
import { forwarding } from "../rpc/forwarding.js";
import { answerFailures } from "../rpc/edge-interceptors.js";
import { clientOfRequest } from "../client-address.js";
import { lingerUntilDiscarded } from "./edge/body-guard.js";
import {
  answerThroughHandler, refusing, RpcAdmission, withBody, type RpcAdmissionSettings,
} from "./edge/rpc-admission.js";

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

export interface ConnectRoutesOptions extends RpcAdmissionSettings {
  /** Prompt, metadata and input-image limits: each method's message limit derives from them (as on the core port). */
  readonly limits: ValidationLimits;
}

/** The admission of the call a universal handler serves (set in onRequest, read by the guarded handler). */
const ADMISSION = createContextKey<RpcAdmission | undefined>(undefined, { description: "gateway RPC admission" });

/**
 * The handler Connect built for a method, with the edge in front of its body:
 * the body it reads is the admission's (each piece admitted as it arrives),
 * a malformed request message is answered INVALID_ARGUMENT malformed_message
 * as on the core port (Connect says INTERNAL), and once the answer is ready
 * the idle timeout applies again (the gateway's preHandler paused it while
 * the service works).
 */
function guarded(handler: UniversalHandler): UniversalHandler {
  const serve = async (request: UniversalServerRequest) => {
    const admission = request.contextValues?.get(ADMISSION);
    if (!admission) return handler(request);
    const progress: CallProgress = { refused: false, invoked: false };
    request.contextValues?.set(CALL_PROGRESS, progress);
    let response = await handler({ ...request, body: admittedBody(admission.body(), progress) });
    const inspected = await inspectParseFailure(response, admission.protocol, progress);
    response = inspected.parseFailure
      ? await handler(withBody(request, refusing(malformedMessage(`${handler.service.typeName}/${handler.method.name}`))))
      : inspected.response;
    admission.answering();
    return response;
  };
  return Object.assign(serve, {
    protocolNames: handler.protocolNames,
    service: handler.service,
    method: handler.method,
    requestPath: handler.requestPath,
    allowedMethods: handler.allowedMethods,
    supportedContentType: handler.supportedContentType,
  });
}

/**
 * GenerationService, TextService, AdminService and FileService on the
 * gateway port, in Connect and gRPC-Web over HTTP/1.1 (@connectrpc/connect-fastify),
 * for browsers and clients without HTTP/2; gRPC itself needs HTTP/2 trailers
 * and stays on the core port. Each call is forwarded to `core`, so the rules
 * are the core's, and the answers and errors are the core port's.
 *
 * The edge is the core port's (method-policy.ts, refusals.ts), over HTTP/1.1
 * (RpcAdmission): readiness, credentials from the headers and the announced
 * size are checked before a byte of the body is read, each refusal answered
 * in the caller's protocol. Encapsulated, and registered before the REST
 * readiness gate so that the gate (which answers in the REST shape) does not
 * stand in front of these routes: their own gate answers 503 as Connect's
 * `unavailable` or a gRPC-Web status.
 */
export function connectRoutes(core: CoreClients, options: ConnectRoutesOptions) {
  const policies = methodPolicies(options.limits, options.edge.maxBodyBytes);
  return async (scope: FastifyInstance) => {
    const handlers = new Map<string, { readonly handler: UniversalHandler; readonly policy: MethodPolicy }>();
    const admissions = new WeakMap<FastifyRequest, RpcAdmission>();
    const deliveries = new WeakMap<FastifyRequest, AnswerDelivery>();

    scope.addHook("onRequest", async (request, reply) => {
      const route = handlers.get(request.routeOptions.url ?? "");
      if (!route) return;
      const { handler, policy } = route;
      // A method Connect does not serve this way (GET, OPTIONS without CORS): its 405, the body left unread.
      if (!handler.allowedMethods.includes(request.method)) return lingerUntilDiscarded(request, { answered: reply });
      // No protocol Connect knows, or gRPC (it needs HTTP/2: its clients use the core port): Connect's bare 415, the body unread.
      const protocol = protocolOf(request.headers["content-type"]);
      if (protocol === undefined || protocol === "grpc") {
        lingerUntilDiscarded(request);
        return reply.code(415).send();
      }
      const admission = new RpcAdmission(request, reply, policy, options);
      const refusal = await admission.refusalBeforeBody();
      if (refusal) return answerThroughHandler(handler, request, reply, refusal);
      admissions.set(request, admission);
      if (ANSWER_WATCHED.has(policy.method)) deliveries.set(request, replyDelivery(reply));
      reply.raw.once("close", () => {
        if (!reply.raw.writableFinished) request.log.debug({ path: request.url.split("?")[0] }, "client went away");
      });
    });

    await scope.register(fastifyConnectPlugin, {
      // A crash is logged once, with its stack; a refusal is an answer.
      interceptors: [answerFailures((message, error) => scope.log.error({ err: error }, message)), markInvoked],
      contextValues: (request) => createContextValues()
        .set(ADMISSION, admissions.get(request))
        .set(CLIENT_ADDRESS, clientOfRequest(request))
        .set(ANSWER_DELIVERY, deliveries.get(request)),
      routes: (router: ConnectRouter) => {
        for (const [service, clientOf] of FORWARDED) {
          const implementation = forwarding(service, () => clientOf(core));
          for (const method of service.methods) {
            const { maxMessageBytes } = policies.get(`/${service.typeName}/${method.name}`)!;
            router.rpc(method, implementation[method.localName] as never, { readMaxBytes: maxMessageBytes });
          }
        }
        // The plugin mounts router.handlers once this returns: each is mounted behind the edge.
        router.handlers.forEach((handler, index) => {
          handlers.set(handler.requestPath, { handler, policy: policies.get(handler.requestPath)! });
          router.handlers[index] = guarded(handler);
        });
      },
    });
  };
}
