import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { createContextValues, type ContextValues, type HandlerContext } from "@connectrpc/connect";

const NO_DEADLINE = () => undefined;

/** Something that makes a call's signal when it is first asked for (LazyAbort, or a gateway request's call options). */
export interface SignalSource {
  readonly signal: AbortSignal;
}

/**
 * Call options that carry it set their signal source here: the in-process
 * client hands it to the handler's context as it is, so a handler that never
 * reads its signal never makes one.
 */
export const SIGNAL_SOURCE: unique symbol = Symbol("signalSource");

/**
 * An abort for a call whose handler may never look at its signal (GetJob
 * reads a cached job and answers): the AbortController is made when the
 * signal is first asked for, already aborted if the call was by then. A
 * controller and its signal per call were 3 % of a gRPC GetJob's CPU.
 */
export class LazyAbort implements SignalSource {
  private controller: AbortController | undefined;
  private reason: unknown;
  private aborted = false;
  private unlink: (() => void) | undefined;

  /** `parent`: a signal source whose abort aborts this one too (read only when this signal is first asked for). */
  constructor(private readonly parent?: SignalSource) {}

  get signal(): AbortSignal {
    if (!this.controller) {
      const controller = (this.controller = new AbortController());
      if (this.aborted) controller.abort(this.reason);
      else if (this.parent) {
        const parent = this.parent.signal;
        const follow = () => this.abort(parent.reason);
        if (parent.aborted) follow();
        else {
          parent.addEventListener("abort", follow, { once: true });
          this.unlink = () => parent.removeEventListener("abort", follow);
        }
      }
    }
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.unlink?.();
    this.controller?.abort(reason);
  }
}

/**
 * A handler's context for one unary call, made for the hot paths that call
 * the core's implementations without Connect's router (the gateway's
 * in-process client, grpc-js on the core port): the caller's own signal (or
 * a LazyAbort's) and
 * headers, nothing linked, nothing to clean up. Connect's createHandlerContext
 * links a new AbortController to the caller's signal and builds three Headers
 * for every call, and the call must abort it when done (which builds an
 * error): on the gateway's hot path that was a tenth of a GET's CPU (issue 13).
 * Response headers and trailers are made only if a handler asks for them;
 * `setHeader` and `setTrailer` tell the caller whether it did.
 */
export class LightHandlerContext implements HandlerContext {
  readonly requestMethod = "POST";
  readonly url: string;
  private header: Headers | undefined;
  private trailer: Headers | undefined;

  constructor(
    readonly service: DescService,
    readonly method: DescMethod,
    readonly protocolName: string,
    private readonly signalSource: AbortSignal | SignalSource,
    readonly requestHeader: Headers,
    readonly timeoutMs: () => number | undefined = NO_DEADLINE,
    private givenValues?: ContextValues,
  ) {
    this.url = `/${service.typeName}/${method.name}`;
  }

  /** The call's context values: the caller's, or an empty set made when a handler first asks. */
  get values(): ContextValues {
    return (this.givenValues ??= createContextValues());
  }

  get signal(): AbortSignal {
    const source = this.signalSource;
    return source instanceof AbortSignal ? source : source.signal;
  }

  get responseHeader(): Headers {
    return (this.header ??= new Headers());
  }

  get responseTrailer(): Headers {
    return (this.trailer ??= new Headers());
  }

  /** The response headers a handler set, if it touched them. */
  get setHeader(): Headers | undefined {
    return this.header;
  }

  /** The response trailers a handler set, if it touched them. */
  get setTrailer(): Headers | undefined {
    return this.trailer;
  }
}
