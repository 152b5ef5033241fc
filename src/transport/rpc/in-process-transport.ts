import { create, type DescMessage, type DescMethod, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ConnectError, createContextValues, makeAnyClient, type CallOptions, type Client, type ContextValues, type HandlerContext, type Interceptor,
  type StreamRequest, type StreamResponse, type UnaryRequest, type UnaryResponse,
} from "@connectrpc/connect";

type AnyHandler = (request: unknown, context: HandlerContext) => unknown;
type AnyRequest = UnaryRequest | StreamRequest;
type AnyResponse = UnaryResponse | StreamResponse;
type Next = (request: AnyRequest) => Promise<AnyResponse>;

/** The signal of a call whose caller passed none: nothing aborts it. */
const NEVER = new AbortController().signal;

/** Why a server stream's signal aborts once the stream is over (one shared reason: no error built per call). */
const CALL_ENDED = new ConnectError("call ended", 1);

/**
 * One call in this process: the request its interceptors see and the context
 * its handler gets, in one object. Its signal is read from the caller's
 * options only when something asks for it (a gateway request makes its
 * AbortController then), a deadline makes one that aborts when it passes, and
 * a server stream's aborts when the stream ends, as Connect's router does;
 * response headers and trailers are made only when touched.
 */
class InProcessCall implements HandlerContext {
  readonly requestMethod = "POST";
  readonly protocolName = "in-process";
  readonly url: string;
  readonly service: DescService;
  readonly header: Headers;
  readonly requestHeader: Headers;
  readonly contextValues: ContextValues;
  private controller: AbortController | undefined;
  private timer: NodeJS.Timeout | undefined;
  private deadline: number | undefined;
  private responseHeaders: Headers | undefined;
  private responseTrailers: Headers | undefined;

  constructor(
    readonly method: DescMethod,
    private readonly options: CallOptions,
    private readonly ownSignal: boolean,
  ) {
    this.service = method.parent;
    this.url = `/${method.parent.typeName}/${method.name}`;
    this.header = this.requestHeader = options.headers instanceof Headers ? options.headers : new Headers(options.headers);
    this.contextValues = options.contextValues ?? createContextValues();
    if (options.timeoutMs !== undefined) this.deadline = performance.now() + options.timeoutMs;
  }

  get values(): ContextValues {
    return this.contextValues;
  }

  get signal(): AbortSignal {
    if (this.deadline === undefined && !this.ownSignal) return this.options.signal ?? NEVER;
    if (!this.controller) {
      const controller = (this.controller = new AbortController());
      const caller = this.options.signal;
      if (caller?.aborted) controller.abort(caller.reason);
      else caller?.addEventListener("abort", () => controller.abort(caller.reason), { once: true });
      if (this.deadline !== undefined) {
        const left = this.deadline - performance.now();
        const expire = () => controller.abort(new ConnectError("the operation timed out", 4));
        if (left <= 0) expire();
        else this.timer = setTimeout(expire, left);
      }
    }
    return this.controller.signal;
  }

  timeoutMs = (): number | undefined => (this.deadline === undefined ? undefined : this.deadline - performance.now());

  get responseHeader(): Headers {
    return (this.responseHeaders ??= new Headers());
  }

  get responseTrailer(): Headers {
    return (this.responseTrailers ??= new Headers());
  }

  /** The call is over: a signal it made aborts (what the handler started with it stops), its timer goes. */
  end(): void {
    clearTimeout(this.timer);
    this.controller?.abort(CALL_ENDED);
  }
}

/** The unary request of `call` with its message (getters: the signal stays unread until asked for). */
function unaryRequest(call: InProcessCall, message: unknown): UnaryRequest {
  return {
    stream: false, method: call.method, service: call.service, requestMethod: call.requestMethod, url: call.url,
    get signal() { return call.signal; }, header: call.header, contextValues: call.contextValues, message,
  } as UnaryRequest;
}

async function* one<T>(message: T): AsyncGenerator<T> {
  yield message;
}

/** The handler's outputs as messages; the call ends once the stream is over. */
async function* outputs(schema: DescMessage, produced: AsyncIterable<unknown>, call: InProcessCall): AsyncGenerator<unknown> {
  try {
    for await (const output of produced) yield create(schema, output as MessageInitShape<DescMessage>);
  } finally {
    call.end();
  }
}

/** The first (only) request message of a server-streaming call. */
async function single(messages: AsyncIterable<unknown>): Promise<unknown> {
  for await (const message of messages) return message;
  throw new Error("a server-streaming call needs its request message");
}

/**
 * A client of `service` whose calls reach `implementation` in this process
 * through `interceptors` (outermost first), the same functions Connect's
 * router runs for a port's calls: same types, errors and context as over the
 * network, but no message serialized and nothing made per call that no one
 * asks for. Unary and server-streaming methods.
 */
export function createInProcessClient<S extends DescService>(service: S, implementation: object, interceptors: readonly Interceptor[]): Client<S> {
  const handlers = implementation as Record<string, AnyHandler | undefined>;
  const chain = (invoke: Next): Next => interceptors.reduceRight<Next>((next, interceptor) => interceptor(next as never) as Next, invoke);
  return makeAnyClient(service, (method) => {
    const handler = handlers[method.localName]?.bind(implementation);
    if (!handler) return null;
    if (method.methodKind === "unary") {
      const run = chain(async (request) => {
        const context = callOf(request);
        try {
          const output = await handler(request.message, context);
          return {
            stream: false, service, method, header: context.responseHeader, trailer: context.responseTrailer,
            message: create(method.output, output as MessageInitShape<DescMessage>),
          } as UnaryResponse;
        } catch (error) {
          // As Connect's server: the headers the handler set leave with its failure.
          if (error instanceof ConnectError) context.responseHeader.forEach((value, name) => error.metadata.append(name, value));
          throw error;
        } finally {
          context.end();
        }
      });
      return async (input: unknown, options: CallOptions = {}) => {
        const call = new InProcessCall(method, options, false);
        const request = Object.assign(unaryRequest(call, create(method.input, input as MessageInitShape<DescMessage>)), { call });
        const response = await run(request);
        options.onHeader?.(response.header);
        options.onTrailer?.(response.trailer);
        return response.message;
      };
    }
    if (method.methodKind === "server_streaming") {
      const run = chain(async (request) => {
        const context = callOf(request);
        const message = await single(request.message as AsyncIterable<unknown>);
        return {
          stream: true, service, method, header: context.responseHeader, trailer: context.responseTrailer,
          message: outputs(method.output, handler(message, context) as AsyncIterable<unknown>, context),
        } as StreamResponse;
      });
      return (input: unknown, options: CallOptions = {}) => {
        const call = new InProcessCall(method, options, true);
        const request = Object.assign({
          stream: true, method, service, requestMethod: call.requestMethod, url: call.url,
          get signal() { return call.signal; }, header: call.header, contextValues: call.contextValues,
          message: one(create(method.input, input as MessageInitShape<DescMessage>)),
        } as StreamRequest, { call });
        return streamOf(run(request), options);
      };
    }
    return null;
  }) as Client<S>;
}

/** The call a request belongs to (an interceptor may pass on a copy: the call travels with it). */
function callOf(request: AnyRequest): InProcessCall {
  const call = (request as unknown as { call?: InProcessCall }).call;
  if (!call) throw new Error("an in-process call lost its context: an interceptor replaced the request without spreading it");
  return call;
}

/** A server stream's messages, from the response its interceptors resolve to; its header comes first, its trailer once it ends. */
async function* streamOf(pending: Promise<AnyResponse>, options: CallOptions): AsyncGenerator<unknown> {
  const response = await pending;
  options.onHeader?.(response.header);
  try {
    yield* response.message as AsyncIterable<unknown>;
  } catch (error) {
    // As Connect's server: the trailers the handler set leave with its failure.
    if (error instanceof ConnectError) response.trailer.forEach((value, name) => error.metadata.append(name, value));
    throw error;
  }
  options.onTrailer?.(response.trailer);
}
