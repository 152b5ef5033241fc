import { create, type DescMethod, type DescService } from "@bufbuild/protobuf";
import {
  ConnectError, createContextValues, createHandlerContext, makeAnyClient, type CallOptions, type Client, type HandlerContext,
  type ServiceImpl,
} from "@connectrpc/connect";

type AnyHandler = (request: unknown, context: HandlerContext) => unknown;

/**
 * The reason a finished call's context is aborted with (Connect aborts it
 * when the call ends). One shared reason: aborting without one builds a new
 * DOMException per call, a measurable cost on the gateway's hot path.
 */
const CALL_ENDED = new Error("call ended");

function contextFor(service: DescService, method: DescMethod, options: CallOptions = {}) {
  return createHandlerContext({
    service,
    method,
    protocolName: "in-process",
    requestMethod: "POST",
    url: `/${service.typeName}/${method.name}`,
    requestHeader: options.headers,
    requestSignal: options.signal,
    timeoutMs: options.timeoutMs,
    contextValues: options.contextValues,
  });
}

/** The signal of a call whose caller passed none: nothing aborts it. */
const NEVER = new AbortController().signal;

/**
 * The context of a unary call without a deadline: the caller's own signal and
 * headers, nothing linked, nothing to clean up. Connect's createHandlerContext
 * links a new AbortController to the caller's signal and builds three Headers
 * for every call, and the call must abort it when done (which builds an
 * error): on the gateway's hot path that was a fifth of the CPU (issue 2's
 * profile; BENCHMARKS.md). A unary handler's signal thus aborts when its
 * caller's does, not also when it returns: nothing a handler started may
 * outlive its answer anyway. Response headers and trailers an in-process
 * caller never reads are made only if a handler asks for them.
 */
function unaryContext(service: DescService, method: DescMethod, options: CallOptions): HandlerContext {
  let responseHeader: Headers | undefined;
  let responseTrailer: Headers | undefined;
  const header = options.headers;
  return {
    service,
    method,
    protocolName: "in-process",
    requestMethod: "POST",
    url: `/${service.typeName}/${method.name}`,
    signal: options.signal ?? NEVER,
    timeoutMs: () => undefined,
    requestHeader: header instanceof Headers ? header : new Headers(header),
    get responseHeader() { return (responseHeader ??= new Headers()); },
    get responseTrailer() { return (responseTrailer ??= new Headers()); },
    values: options.contextValues ?? createContextValues(),
  };
}

/**
 * A client of the generated service interface that calls the implementation
 * directly: same types, same errors, same context (headers, abort signal) as
 * over the network, but no serialization and no loopback transport.
 */
export function createInProcessClient<S extends DescService>(service: S, implementation: ServiceImpl<S>): Client<S> {
  const handlers = implementation as unknown as Record<string, AnyHandler>;
  return makeAnyClient(service, (method) => {
    const handler = handlers[method.localName]!;
    if (method.methodKind === "unary") {
      return async (input: unknown, options: CallOptions = {}) => {
        if (options.timeoutMs === undefined) {
          try {
            return create(method.output, (await handler(create(method.input, input as never), unaryContext(service, method, options))) as never);
          } catch (error) {
            throw ConnectError.from(error);
          }
        }
        const context = contextFor(service, method, options);
        try {
          return create(method.output, (await handler(create(method.input, input as never), context)) as never);
        } catch (error) {
          throw ConnectError.from(error);
        } finally {
          context.abort(CALL_ENDED);
        }
      };
    }
    if (method.methodKind === "server_streaming") {
      return async function* (input: unknown, options?: CallOptions) {
        const context = contextFor(service, method, options);
        try {
          const stream = handler(create(method.input, input as never), context) as AsyncIterable<unknown>;
          for await (const output of stream) yield create(method.output, output as never);
        } catch (error) {
          throw ConnectError.from(error);
        } finally {
          context.abort(CALL_ENDED);
        }
      };
    }
    return null;
  }) as Client<S>;
}
