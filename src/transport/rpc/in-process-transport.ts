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

/** One call in this process, its handler's context; its signal, made only when asked for, aborts at the deadline or a stream's end. */
class InProcessCall implements HandlerContext {
  readonly requestMethod = "POST";
  readonly protocolName = "in-process";
  readonly url: string;
  readonly service: DescService;
  readonly requestHeader: Headers;
  readonly values: ContextValues;
  private controller: AbortController | undefined;
  private timer: NodeJS.Timeout | undefined;
  private deadline: number | undefined;
  // Made with the call: every answer, or failure, carries them.
  readonly responseHeader = new Headers();
  readonly responseTrailer = new Headers();

  constructor(
    readonly method: DescMethod,
    readonly options: CallOptions,
    private readonly ownSignal: boolean,
  ) {
    this.service = method.parent;
    this.url = `/${method.parent.typeName}/${method.name}`;
    this.requestHeader = options.headers instanceof Headers ? options.headers : new Headers(options.headers);
    this.values = options.contextValues ?? createContextValues();
    if (options.timeoutMs !== undefined) this.deadline = performance.now() + options.timeoutMs;
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

  /** The call is over: a signal it made aborts (what the handler started with it stops), its timer goes. */
  end(): void {
    clearTimeout(this.timer);
    this.controller?.abort(CALL_ENDED);
  }
}

/** The request of `call` its interceptors see (a getter: the signal stays unmade until asked for); `call` travels with it. */
function requestOf(call: InProcessCall, stream: boolean, message: unknown): AnyRequest {
  return {
    stream, method: call.method, service: call.service, requestMethod: call.requestMethod, url: call.url,
    get signal() { return call.signal; }, header: call.requestHeader, contextValues: call.values, message, call,
  } as AnyRequest;
}

/** The call a request belongs to (an interceptor may pass on a copy: the call travels with it). */
function callOf(request: AnyRequest): InProcessCall {
  const call = (request as unknown as { call?: InProcessCall }).call;
  if (!call) throw new Error("an in-process call lost its context: an interceptor replaced the request without spreading it");
  return call;
}

/** As Connect's server: the headers a handler set leave with its failure (never with the caller's abort reason, which may be shared). */
function withHeaders(error: unknown, headers: Headers, options: CallOptions): unknown {
  if (error instanceof ConnectError && error !== options.signal?.reason) headers.forEach((value, name) => error.metadata.set(name, value));
  return error;
}

async function* one<T>(message: T): AsyncGenerator<T> {
  yield message;
}

/** The handler's outputs as messages; the call ends once the stream is over. */
async function* outputs(toMessage: (value: unknown) => unknown, produced: AsyncIterable<unknown>, call: InProcessCall): AsyncGenerator<unknown> {
  try {
    for await (const output of produced) yield toMessage(output);
  } finally {
    call.end();
  }
}

/** A server stream's messages, from the response its interceptors resolve to; its header comes first, its trailer once it ends. */
async function* streamOf(pending: Promise<AnyResponse>, options: CallOptions): AsyncGenerator<unknown> {
  const response = await pending;
  options.onHeader?.(response.header);
  try {
    yield* response.message as AsyncIterable<unknown>;
  } catch (error) {
    throw withHeaders(error, response.trailer, options);
  }
  options.onTrailer?.(response.trailer);
}

/** A client reaching `implementation` through `interceptors` as Connect's router runs them, nothing serialized (decision 0023). */
export function createInProcessClient<S extends DescService>(service: S, implementation: object, interceptors: readonly Interceptor[]): Client<S> {
  const handlers = implementation as Record<string, AnyHandler | undefined>;
  const chain = (invoke: Next): Next => interceptors.reduceRight<Next>((next, interceptor) => interceptor(next as never) as Next, invoke);
  return makeAnyClient(service, (method) => {
    const handler = handlers[method.localName]?.bind(implementation);
    if (!handler) return null;
    const input = (value: unknown) => create(method.input, value as MessageInitShape<DescMessage>);
    const output = (value: unknown) => create(method.output, value as MessageInitShape<DescMessage>);
    const answer = (call: InProcessCall, stream: boolean, message: unknown) =>
      ({ stream, service, method, header: call.responseHeader, trailer: call.responseTrailer, message }) as AnyResponse;
    if (method.methodKind === "unary") {
      const run = chain(async (request) => {
        const call = callOf(request);
        try {
          return answer(call, false, output(await handler(request.message, call)));
        } catch (error) {
          throw withHeaders(error, call.responseHeader, call.options);
        } finally {
          call.end();
        }
      });
      return async (value: unknown, options: CallOptions = {}) => {
        const response = await run(requestOf(new InProcessCall(method, options, false), false, input(value)));
        options.onHeader?.(response.header);
        options.onTrailer?.(response.trailer);
        return response.message;
      };
    }
    if (method.methodKind === "server_streaming") {
      const run = chain(async (request) => {
        const call = callOf(request);
        const { value: message } = await (request.message as AsyncIterable<unknown>)[Symbol.asyncIterator]().next();
        return answer(call, true, outputs(output, handler(message, call) as AsyncIterable<unknown>, call));
      });
      return (value: unknown, options: CallOptions = {}) => streamOf(run(requestOf(new InProcessCall(method, options, true), true, one(input(value)))), options);
    }
    return null;
  }) as Client<S>;
}
