import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { CounterCell, HistogramCell } from "../../adapters/observability/metric-cells.js";
import type { PrometheusMetrics } from "../../adapters/observability/prometheus-metrics.js";
import { extractTraceContext, failSpan, inSpan, SpanKind, startSpan } from "../../adapters/observability/tracing.js";
import { SteppedStream } from "../../shared/stream-step.js";

type AnyHandler = (request: unknown, context: HandlerContext) => unknown;

/** A call's code as gRPC names it (OK, INVALID_ARGUMENT, …): the `code` label of the RPC metrics. */
function codeOf(error: unknown): string {
  const code = error === undefined ? undefined : ConnectError.from(error).code;
  return code === undefined ? "OK" : Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** The headers of a call as a carrier of its trace context (an incoming traceparent). */
const headersOf = (context: HandlerContext): Record<string, string> => Object.fromEntries(context.requestHeader.entries());

/**
 * The core's service implementations, counted and timed per method and code
 * (rpc_server_*), whichever way they are called: over gRPC, gRPC-Web or
 * Connect on the core port, or in-process from the gateway beside them.
 * With tracing on, each call is a server span, continuing the caller's trace
 * (its traceparent header, or the gateway's request span in-process).
 */
export function instrumentService<S extends DescService>(
  service: S, implementation: ServiceImpl<S>, metrics: PrometheusMetrics["rpc"], tracing: boolean,
): ServiceImpl<S> {
  const handlers = implementation as unknown as Record<string, AnyHandler>;
  const instrumented: Record<string, AnyHandler> = {};
  const serviceName = service.name;
  for (const method of service.methods) {
    const handler = handlers[method.localName]!.bind(implementation);
    // The metric cells of this method (per code: made at its first call with that code), not looked up per call.
    const inFlight = metrics.inFlight.cell({ service: serviceName });
    const cellsByCode = new Map<string, { readonly count: CounterCell; readonly time: HistogramCell }>();
    const finish = (started: number, error: unknown) => {
      const code = codeOf(error);
      let cells = cellsByCode.get(code);
      if (!cells) {
        const labels = { service: serviceName, method: method.name, code };
        cellsByCode.set(code, (cells = { count: metrics.requests.cell(labels), time: metrics.duration.cell(labels) }));
      }
      cells.count.inc();
      cells.time.observe((performance.now() - started) / 1000);
      inFlight.dec();
    };
    const spanName = `${service.typeName}/${method.name}`;
    const spanAttributes = { "rpc.system": "grpc", "rpc.service": service.typeName, "rpc.method": method.name };
    // A text stream's first message carries its first token.
    const firstEvent = serviceName === "TextService" ? "first_token" : "first_message";
    if (method.methodKind === "unary") {
      const counted = async (request: unknown, context: HandlerContext) => {
        const started = performance.now();
        inFlight.inc();
        try {
          const response = await handler(request, context);
          finish(started, undefined);
          return response;
        } catch (error) {
          finish(started, error);
          throw error;
        }
      };
      instrumented[method.localName] = tracing
        ? (request, context) =>
            inSpan(spanName, { kind: SpanKind.SERVER, attributes: spanAttributes, parent: extractTraceContext(headersOf(context)) }, () =>
              counted(request, context),
            )
        : counted;
    } else if (method.methodKind === "server_streaming") {
      instrumented[method.localName] = (request: unknown, context: HandlerContext) => {
        let started = 0;
        let span: ReturnType<typeof startSpan> | undefined;
        let first = true;
        return new SteppedStream<unknown, unknown>({
          open: () => {
            started = performance.now();
            inFlight.inc();
            // One span for the whole stream, with an event at its first message and at its end.
            span = tracing
              ? startSpan(spanName, { kind: SpanKind.SERVER, attributes: spanAttributes, parent: extractTraceContext(headersOf(context)) })
              : undefined;
            return handler(request, context) as AsyncIterable<unknown>;
          },
          map: (message) => {
            if (first) span?.addEvent(firstEvent);
            first = false;
            return message;
          },
          ended: (outcome, error) => {
            if (outcome === "done") span?.addEvent("end");
            if (outcome === "failed" && span) failSpan(span, error);
            finish(started, outcome === "failed" ? error : undefined);
            span?.end();
          },
        });
      };
    } else {
      instrumented[method.localName] = handler;
    }
  }
  return instrumented as unknown as ServiceImpl<S>;
}
