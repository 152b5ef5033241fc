import type { DescService } from "@bufbuild/protobuf";
import {
  Code, ConnectError, createContextKey, createContextValues, type CallOptions, type ConnectRouter, type HandlerContext,
} from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from "fastify";
import { AccountService } from "../../../gen/generation/v1/account_service_pb.js";
import { AdminService } from "../../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../../gen/generation/v1/text_service_pb.js";
import type { ValidationLimits } from "../../domain/validation/limits.js";
import type { CoreClients } from "../../runtime/core-clients.js";
import { ANSWER_WATCHED, methodPolicies, type MethodPolicy } from "../rpc/method-policy.js";
import { ANSWER_DELIVERY, type AnswerDelivery } from "../../core/jobs/answer-delivery.js";
import { replyDelivery } from "./call-options.js";
import { malformedMessage } from "../rpc/refusals.js";
import { inspectParseFailure, protocolOf } from "../rpc/wire-protocol.js";
import { httpErrorOf } from "./connect-errors.js";
import { CLIENT_ADDRESS } from "../../core/auth/credential-guard.js";
import { clientOfRequest } from "../client-address.js";
import { lingerUntilDiscarded } from "./edge/body-guard.js";
import {
  answerThroughHandler, credentialsOf, refusing, RpcAdmission, withBody, type RpcAdmissionSettings,
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

type Forward = (request: unknown, options: CallOptions) => unknown;

/**
 * What a forwarded call takes along to the core: the caller's credentials
 * (nothing else of its headers) and client address, its abort signal (the client went away, or
 * its deadline passed) and what is left of its deadline.
 */
function callOptions(context: HandlerContext): CallOptions {
  const timeoutMs = context.timeoutMs();
  const values = createContextValues().set(CLIENT_ADDRESS, context.values.get(CLIENT_ADDRESS));
  // A creation's delivery goes along to an in-process core (a remote one hears of a reset through the call's signal).
  const delivery = context.values.get(ANSWER_DELIVERY);
  if (delivery) values.set(ANSWER_DELIVERY, delivery);
  return { headers: credentialsOf(context.requestHeader), signal: context.signal, contextValues: values, ...(timeoutMs === undefined ? {} : { timeoutMs }) };
}

/**
 * The core's error as the caller gets it: code, message and details (the
 * ErrorDetail with reason, HTTP status, Retry-After), never its cause or the
 * core's response headers (a remote core's ConnectError carries them as
 * metadata, which Connect would copy into this answer). A fault of this
 * service (what the REST surface answers as internal_error: no detail, 5xx)
 * is logged with its stack and leaves as "internal error".
 */
function passedOn(error: unknown, context: HandlerContext, log: FastifyBaseLogger): ConnectError {
  // The caller's deadline passed (the call's signal says so, or it is about to): that is the answer,
  // whatever the aborted forward reported (its own copy of the deadline may fire first, as a cancel).
  const ended = context.signal.aborted ? ConnectError.from(context.signal.reason) : undefined;
  if (ended?.code === Code.DeadlineExceeded || (context.timeoutMs() ?? 1) <= 0) {
    return new ConnectError("the operation timed out", Code.DeadlineExceeded);
  }
  const received = ConnectError.from(error);
  if (!context.signal.aborted && httpErrorOf(received).reason === "internal_error") {
    log.error({ err: error }, `rpc ${context.service.typeName}/${context.method.name} failed`);
    return new ConnectError("internal error", received.code === Code.Unknown ? Code.Internal : received.code);
  }
  const answer = new ConnectError(received.rawMessage, received.code);
  answer.details = received.details;
  return answer;
}

/** A service implementation whose every method calls the same method of the core's client (read per call: `core` may be lazy). */
function forwarding(service: DescService, clientOf: () => object, log: FastifyBaseLogger): Record<string, unknown> {
  const implementation: Record<string, unknown> = {};
  for (const method of service.methods) {
    const forward: Forward = (request, options) => (clientOf() as Record<string, Forward>)[method.localName]!(request, options);
    if (method.methodKind === "unary") {
      implementation[method.localName] = async (request: unknown, context: HandlerContext) => {
        try {
          return await forward(request, callOptions(context));
        } catch (error) {
          throw passedOn(error, context, log);
        }
      };
    } else if (method.methodKind === "server_streaming") {
      implementation[method.localName] = async function* (request: unknown, context: HandlerContext) {
        try {
          yield* forward(request, callOptions(context)) as AsyncIterable<unknown>;
        } catch (error) {
          throw passedOn(error, context, log);
        }
      };
    } else {
      throw new Error(`${service.typeName}/${method.name}: only unary and server-streaming methods are forwarded over HTTP/1.1`);
    }
  }
  return implementation;
}

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
    let response = await handler({ ...request, body: admission.body() });
    const inspected = await inspectParseFailure(response, admission.protocol);
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
      contextValues: (request) => createContextValues()
        .set(ADMISSION, admissions.get(request))
        .set(CLIENT_ADDRESS, clientOfRequest(request))
        .set(ANSWER_DELIVERY, deliveries.get(request)),
      routes: (router: ConnectRouter) => {
        for (const [service, clientOf] of FORWARDED) {
          const implementation = forwarding(service, () => clientOf(core), scope.log);
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
