import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextKey, createContextValues, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { compressionBrotli, compressionGzip, universalRequestFromNodeRequest } from "@connectrpc/connect-node";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ANSWER_DELIVERY, CLIENT_ADDRESS, type AnswerDelivery, type ValidationLimits } from "../../core/index.js";
import { answerFailures } from "./edge-interceptors.js";
import { ANSWER_WATCHED, methodPolicies, type MethodPolicy } from "./method-policy.js";
import { malformedMessage, withHttpStatus } from "./refusals.js";
import { protocolOf, RpcAdmission, type RpcAdmissionSettings, type WireHooks, type WireProtocol } from "./rpc-admission.js";

/** What a port's Connect routes do that depends on its wire (HTTP/1.1 on the gateway port, HTTP/2 on the core port). */
export interface ConnectWire extends WireHooks {
  /** Whether gRPC itself is served (it needs HTTP/2's trailers). */
  readonly grpc: boolean;
  /** Whether the creation's answer reached its client (the core cancels a job whose 202 never left). */
  delivery(request: FastifyRequest, reply: FastifyReply): AnswerDelivery;
  /** Sends `refusal` as Connect wrote it in the caller's protocol (`response`), with the reply's own headers. */
  sendRefusal(reply: FastifyReply, response: UniversalServerResponse, refusal: ConnectError): Promise<unknown>;
  /** One debug line when the client went away before its answer was complete. */
  watchClient(request: FastifyRequest, reply: FastifyReply): void;
  /** A refusal before the body, `elapsedMs` after the call arrived: what the wire adds to it (Server-Timing). */
  refusing?(refusal: ConnectError, elapsedMs: number): void;
}

export interface ConnectRoutesOptions {
  readonly settings: RpcAdmissionSettings;
  /** Prompt, metadata and input-image limits: each method's message limit derives from them. */
  readonly limits: ValidationLimits;
  /** What is served: each service with its implementation. */
  readonly services: readonly (readonly [DescService, object])[];
  /** The port's interceptors, outermost first (answerFailures and markInvoked follow them). */
  readonly interceptors?: readonly Interceptor[];
  readonly wire: ConnectWire;
  /** Crashes (error level, with the stack). */
  readonly log: (message: string, error: unknown) => void;
}

/** The admission of the call a universal handler serves (set in onRequest, read by the guarded handler). */
const ADMISSION = createContextKey<RpcAdmission | undefined>(undefined, { description: "RPC admission" });

/** `request` with a body that refuses it at Connect's first read (then answered in the caller's protocol); no Content-Length, which Connect would size first. */
function refused(request: UniversalServerRequest, error: ConnectError): UniversalServerRequest {
  const header = new Headers(request.header);
  header.delete("content-length");
  return { ...request, header, body: (async function* (): AsyncGenerator<Uint8Array> { throw error; })() };
}

/** An RPC's path, `/package.Service/Method`: what Connect and gRPC-Web clients call. */
const RPC_PATH = /^\/[a-z_]\w*(\.[a-z_]\w*)*\.[A-Z]\w*\/[A-Z]\w*$/;

/** An unknown method: gRPC(-Web) a trailers-only UNIMPLEMENTED (HTTP 200), as gRPC servers answer; Connect (or no protocol) 404. */
export function unknownRpcAnswer(
  request: Pick<FastifyRequest, "method" | "url" | "headers">, anyPath = false,
): { status: number; headers: Record<string, string>; body?: Buffer } | undefined {
  const path = request.url.split("?", 1)[0]!;
  if (!anyPath && (request.method !== "POST" || !RPC_PATH.test(path))) return undefined;
  const protocol = protocolOf(request.headers["content-type"]);
  const message = `unknown method ${path}`;
  if (protocol === "grpc-web" || protocol === "grpc") {
    const status = { "grpc-status": String(Code.Unimplemented), "grpc-message": encodeURIComponent(message) };
    return { status: 200, headers: { "content-type": request.headers["content-type"]!, ...status } };
  }
  return { status: 404, headers: { "content-type": "application/json" }, body: Buffer.from(JSON.stringify({ code: "unimplemented", message })) };
}

/** Connect reports a request message that is not protobuf as INTERNAL; one the edge did not refuse is the caller's fault. */
const isParseFailure = (error: unknown, admission: RpcAdmission) =>
  error instanceof ConnectError && error.code === Code.Internal && !admission.bodyFailed;

/** The innermost interceptor: the call got past parsing; a stream's first message, parsed as the handler pulls it, is checked here. */
const markInvoked: Interceptor = (next) => (request) => {
  const admission = request.contextValues.get(ADMISSION);
  if (!admission) return next(request);
  admission.invoked = true;
  if (!request.stream) return next(request);
  return next({ ...request, message: parsed(request.message, admission, `${request.service.typeName}/${request.method.name}`) });
};

async function* parsed<T>(messages: AsyncIterable<T>, admission: RpcAdmission, method: string): AsyncGenerator<T> {
  let first = true;
  try {
    for await (const message of messages) {
      first = false;
      yield message;
    }
  } catch (error) {
    throw first && isParseFailure(error, admission) ? malformedMessage(method) : error;
  }
}

/** gRPC-Web's trailer frame (its flags byte), whose payload is the status as HTTP header lines. */
const GRPC_WEB_TRAILER = 0x80;
const GRPC_WEB_INTERNAL = new RegExp(`^grpc-status: ?${Code.Internal}\r?$`, "im");

/** The status of a failed unary answer, as each protocol's spec writes it (Connect's readers of it are marked internal). */
function saysInternal(response: UniversalServerResponse, body: Buffer, protocol: WireProtocol): boolean {
  switch (protocol) {
    case "grpc":
      return response.trailer?.get("grpc-status") === String(Code.Internal);
    case "grpc-web":
      return body[0] === GRPC_WEB_TRAILER && GRPC_WEB_INTERNAL.test(body.subarray(5).toString("latin1"));
    case "connect-unary":
      try {
        return response.status === 500 && (JSON.parse(body.toString("utf8")) as { code?: unknown }).code === "internal";
      } catch {
        return false;
      }
    case "connect-stream":
      return false;
  }
}

/** A unary call Connect failed while parsing (before the interceptors), its body not refused: its short answer read whole. */
async function parseFailureOf(response: UniversalServerResponse, admission: RpcAdmission): Promise<UniversalServerResponse | undefined> {
  const { protocol } = admission;
  if (admission.invoked || admission.bodyFailed || protocol === undefined || response.body === undefined) return response;
  const chunks: Uint8Array[] = [];
  for await (const chunk of response.body) chunks.push(chunk);
  if (saysInternal(response, Buffer.concat(chunks), protocol)) return undefined;
  return { ...response, body: (async function* () { yield* chunks; })() };
}

/** Connect's handler behind the edge: the admission's body, a malformed message INVALID_ARGUMENT (Connect says INTERNAL). */
function guarded(handler: UniversalHandler): UniversalHandler {
  const serve = async (request: UniversalServerRequest) => {
    const admission = request.contextValues?.get(ADMISSION);
    if (!admission) return handler(request);
    const response = await parseFailureOf(await handler({ ...request, body: admission.body() }), admission)
      ?? await handler(refused(request, malformedMessage(`${handler.service.typeName}/${handler.method.name}`)));
    admission.answering();
    return response;
  };
  return Object.assign(serve, handler);
}

/** A port's RPCs through connect-fastify behind one edge (RpcAdmission): refusals in the caller's protocol; ports differ by wire. */
export function connectRoutes(options: ConnectRoutesOptions) {
  const policies = methodPolicies(options.limits, options.settings.edge.maxBodyBytes);
  const { wire } = options;
  // Encapsulation does not matter to a plugin's callers: the `any`s are Fastify's server generics (HTTP/1.1 or HTTP/2).
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return async (scope: FastifyInstance<any, any, any, any>) => {
    const handlers = new Map<string, { readonly handler: UniversalHandler; readonly policy: MethodPolicy }>();
    const admitted = new WeakMap<FastifyRequest, { readonly admission: RpcAdmission; readonly delivery?: AnswerDelivery }>();

    scope.addHook("onRequest", async (request: FastifyRequest, reply: FastifyReply) => {
      const arrived = performance.now();
      const route = handlers.get(request.routeOptions.url ?? "");
      if (!route) return;
      const { handler, policy } = route;
      // A method Connect does not serve this way (GET, OPTIONS without CORS): its 405, the body left unread.
      if (!handler.allowedMethods.includes(request.method)) {
        wire.abandonBody(request, reply);
        return;
      }
      // No protocol Connect knows, or gRPC where it is not served: Connect's bare 415, the body unread.
      const protocol = protocolOf(request.headers["content-type"]);
      if (protocol === undefined || (protocol === "grpc" && !wire.grpc)) {
        wire.abandonBody(request, reply);
        return reply.code(415).send();
      }
      const admission = new RpcAdmission(request, reply, policy, options.settings, wire, options.log);
      // A credential refused by the core reaches the wire here, not through the interceptors: http_status is filled the same way.
      const refusal = withHttpStatus(await admission.refusalBeforeBody());
      if (refusal) {
        wire.refusing?.(refusal, performance.now() - arrived);
        wire.abandonBody(request, reply);
        const universal = universalRequestFromNodeRequest(request.raw, reply.raw, undefined, undefined);
        return wire.sendRefusal(reply, await handler(refused(universal, refusal)), refusal);
      }
      admitted.set(request, { admission, delivery: ANSWER_WATCHED.has(policy.method) ? wire.delivery(request, reply) : undefined });
      wire.watchClient(request, reply);
    });

    await scope.register(fastifyConnectPlugin, {
      // A crash is logged once, with its stack; a refusal is an answer (its ErrorDetail with http_status).
      interceptors: [...(options.interceptors ?? []), answerFailures(options.log), markInvoked],
      acceptCompression: [compressionGzip, compressionBrotli],
      contextValues: (request: FastifyRequest) => {
        const call = admitted.get(request);
        return createContextValues().set(ADMISSION, call?.admission).set(CLIENT_ADDRESS, call?.admission.client).set(ANSWER_DELIVERY, call?.delivery);
      },
      routes: (router: ConnectRouter) => {
        for (const [service, implementation] of options.services) {
          for (const method of service.methods) {
            // The edge refuses a message over its method's limit from its length prefix; Connect applies the same
            // limit to the message once decompressed (a small compressed message cannot grow past it).
            const { maxMessageBytes } = policies.get(`/${service.typeName}/${method.name}`)!;
            const impl = (implementation as Record<string, (...args: never[]) => unknown>)[method.localName]!.bind(implementation);
            router.rpc(method, impl as never, { readMaxBytes: maxMessageBytes });
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
