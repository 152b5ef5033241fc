import { create, type DescMethod, type DescService } from "@bufbuild/protobuf";
import {
  ConnectError, createHandlerContext, makeAnyClient, type CallOptions, type Client, type HandlerContext, type ServiceImpl,
} from "@connectrpc/connect";
import { SteppedStream } from "../../shared/stream-step.js";
import { LazyAbort, LightHandlerContext, SIGNAL_SOURCE, type SignalSource } from "./light-context.js";

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
 * The context of a unary call without a deadline (LightHandlerContext). A
 * unary handler's signal thus aborts when its caller's does, not also when it
 * returns: nothing a handler started may outlive its answer anyway.
 */
function unaryContext(service: DescService, method: DescMethod, options: CallOptions): HandlerContext {
  const header = options.headers;
  const source = (options as { [SIGNAL_SOURCE]?: SignalSource })[SIGNAL_SOURCE];
  return new LightHandlerContext(
    service, method, "in-process", source ?? options.signal ?? NEVER, header instanceof Headers ? header : new Headers(header), undefined,
    options.contextValues,
  );
}

/**
 * The abort of a server-streaming call without a deadline: a LazyAbort
 * following the caller's signal source (or signal), made only if the handler
 * asks for its signal, and aborted when the stream ends, as Connect's context is.
 */
function streamAbort(options: CallOptions): LazyAbort {
  const source = (options as { [SIGNAL_SOURCE]?: SignalSource })[SIGNAL_SOURCE];
  const given = source ? undefined : options.signal;
  return new LazyAbort(source ?? (given ? { signal: given } : undefined));
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
      return (input: unknown, options: CallOptions = {}) => {
        let lazy: LazyAbort | undefined;
        let connect: ReturnType<typeof contextFor> | undefined;
        return new SteppedStream<unknown, unknown>({
          open: () => {
            // Without a deadline, a light context (as for unary calls) on a LazyAbort.
            lazy = options.timeoutMs === undefined ? streamAbort(options) : undefined;
            connect = lazy ? undefined : contextFor(service, method, options);
            const header = options.headers;
            const context = connect ?? new LightHandlerContext(
              service, method, "in-process", lazy!, header instanceof Headers ? header : new Headers(header), undefined, options.contextValues,
            );
            return handler(create(method.input, input as never), context) as AsyncIterable<unknown>;
          },
          map: (output) => create(method.output, output as never),
          ended: () => {
            lazy?.abort(CALL_ENDED);
            connect?.abort(CALL_ENDED);
          },
          failure: (error) => ConnectError.from(error),
        });
      };
    }
    return null;
  }) as Client<S>;
}
