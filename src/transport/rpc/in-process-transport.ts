import { create, type DescMessage, type DescMethod, type DescMethodStreaming, type DescMethodUnary, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import {
  createContextValues, createHandlerContext, type ContextValues, type HandlerContext, type Interceptor, type StreamResponse,
  type Transport, type UnaryResponse,
} from "@connectrpc/connect";
import { runStreamingCall, runUnaryCall } from "@connectrpc/connect/protocol";

type HeaderInit = ConstructorParameters<typeof Headers>[0];
type AnyHandler = (request: unknown, context: HandlerContext) => unknown;

/** A service and its implementation, as a router takes them. */
export type Served = readonly [DescService, object];

/**
 * A Connect transport to services in this process: every call runs through
 * `interceptors` (the same functions the router gives the ports' calls) and
 * reaches the implementation with a handler context, as a call over the
 * network does, but no message is serialized and no socket is involved.
 */
export function createInProcessTransport(served: readonly Served[], interceptors: readonly Interceptor[]): Transport {
  const handlers = new Map<DescMethod, AnyHandler>();
  for (const [service, implementation] of served) {
    for (const method of service.methods) {
      const handler = (implementation as Record<string, AnyHandler | undefined>)[method.localName];
      if (handler) handlers.set(method, handler.bind(implementation));
    }
  }
  const handlerOf = (method: DescMethod): AnyHandler => {
    const handler = handlers.get(method);
    if (!handler) throw new Error(`${method.parent.typeName}/${method.name} is not served in this process`);
    return handler;
  };
  const contextOf = (method: DescMethod, signal: AbortSignal, header: Headers, values: ContextValues, timeoutMs: number | undefined) =>
    createHandlerContext({
      service: method.parent, method, protocolName: "in-process", requestMethod: "POST", url: urlOf(method),
      requestHeader: header, requestSignal: signal, timeoutMs, contextValues: values,
    });
  return {
    unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>, signal: AbortSignal | undefined, timeoutMs: number | undefined, header: HeaderInit,
      input: MessageInitShape<I>, contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      const handler = handlerOf(method);
      return runUnaryCall<I, O>({
        interceptors: [...interceptors], signal, timeoutMs,
        req: {
          stream: false, service: method.parent, method, requestMethod: "POST", url: urlOf(method),
          header: new Headers(header), contextValues: contextValues ?? createContextValues(), message: input,
        },
        next: async (request) => {
          const context = contextOf(method, request.signal, request.header, request.contextValues, timeoutMs);
          try {
            const output = await handler(request.message, context);
            return {
              stream: false, service: method.parent, method, header: context.responseHeader, trailer: context.responseTrailer,
              message: create(method.output, output as MessageInitShape<O>),
            };
          } finally {
            context.abort();
          }
        },
      });
    },
    stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>, signal: AbortSignal | undefined, timeoutMs: number | undefined, header: HeaderInit,
      input: AsyncIterable<MessageInitShape<I>>, contextValues?: ContextValues,
    ): Promise<StreamResponse<I, O>> {
      const handler = handlerOf(method);
      if (method.methodKind !== "server_streaming") throw new Error(`${method.name}: only unary and server-streaming methods are served in-process`);
      return runStreamingCall<I, O>({
        interceptors: [...interceptors], signal, timeoutMs,
        req: {
          stream: true, service: method.parent, method, requestMethod: "POST", url: urlOf(method),
          header: new Headers(header), contextValues: contextValues ?? createContextValues(), message: input,
        },
        next: async (request) => {
          const context = contextOf(method, request.signal, request.header, request.contextValues, timeoutMs);
          const message = await single(request.message);
          return {
            stream: true, service: method.parent, method, header: context.responseHeader, trailer: context.responseTrailer,
            message: outputs(method.output, handler(message, context) as AsyncIterable<MessageInitShape<O>>, context),
          };
        },
      });
    },
  };
}

const urlOf = (method: DescMethod) => `/${method.parent.typeName}/${method.name}`;

/** A server-streaming call's one request message. */
async function single<T>(messages: AsyncIterable<T>): Promise<T> {
  for await (const message of messages) return message;
  throw new Error("a server-streaming call needs its request message");
}

/** The handler's outputs as messages; its context is aborted once the stream is over, as Connect's router does. */
async function* outputs<O extends DescMessage>(
  schema: O, produced: AsyncIterable<MessageInitShape<O>>, context: ReturnType<typeof createHandlerContext>,
): AsyncGenerator<ReturnType<typeof create<O>>> {
  try {
    for await (const output of produced) yield create(schema, output);
  } finally {
    context.abort();
  }
}
