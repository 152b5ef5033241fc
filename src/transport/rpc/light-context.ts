import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { createContextValues, type ContextValues, type HandlerContext } from "@connectrpc/connect";

const NO_DEADLINE = () => undefined;

/**
 * A handler's context for one unary call, made for the hot paths that call
 * the core's implementations without Connect's router (the gateway's
 * in-process client, grpc-js on the core port): the caller's own signal and
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
    readonly signal: AbortSignal,
    readonly requestHeader: Headers,
    readonly timeoutMs: () => number | undefined = NO_DEADLINE,
    readonly values: ContextValues = createContextValues(),
  ) {
    this.url = `/${service.typeName}/${method.name}`;
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
