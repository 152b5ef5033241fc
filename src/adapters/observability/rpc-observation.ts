import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { passThrough } from "../../shared/stream-step.js";
import type { CounterCell, GaugeCell, HistogramCell } from "./metric-cells.js";
import type { PrometheusMetrics } from "./prometheus-metrics.js";
import { extractTraceContext, failSpan, inSpan, SpanKind, startSpan } from "./tracing.js";

/** A call's code as gRPC names it (OK, INVALID_ARGUMENT, …): the `code` label of the RPC metrics. */
function codeOf(error: unknown): string {
  const code = error === undefined ? undefined : ConnectError.from(error).code;
  return code === undefined ? "OK" : Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** One method's metric cells (per code: made at its first call with that code), not looked up per call. */
class MethodCells {
  private readonly byCode = new Map<string, { readonly count: CounterCell; readonly time: HistogramCell }>();
  readonly inFlight: GaugeCell;

  constructor(private readonly metrics: PrometheusMetrics["rpc"], private readonly method: DescMethod) {
    this.inFlight = metrics.inFlight.cell({ service: method.parent.name });
  }

  finish(started: number, error: unknown): void {
    const code = codeOf(error);
    let cells = this.byCode.get(code);
    if (!cells) {
      const labels = { service: this.method.parent.name, method: this.method.name, code };
      this.byCode.set(code, (cells = { count: this.metrics.requests.cell(labels), time: this.metrics.duration.cell(labels) }));
    }
    cells.count.inc();
    cells.time.observe((performance.now() - started) / 1000);
    this.inFlight.dec();
  }
}

/** The headers of a call as a carrier of its trace context (an incoming traceparent). */
const carrierOf = (header: Headers): Record<string, string> => Object.fromEntries(header.entries());

/**
 * Every call counted and timed per method and code (rpc_server_*), whichever
 * way it arrives: gRPC, gRPC-Web or Connect on a port, or in-process from the
 * gateway. With tracing on, each call is a server span continuing the
 * caller's trace (its traceparent, or the gateway's request span in-process).
 */
export function rpcObservation(metrics: PrometheusMetrics["rpc"], tracing: boolean): Interceptor {
  const cellsOf = new Map<DescMethod, MethodCells>();
  return (next) => async (request) => {
    const method = request.method as DescMethod;
    let cells = cellsOf.get(method);
    if (!cells) cellsOf.set(method, (cells = new MethodCells(metrics, method)));
    const spanName = `${request.service.typeName}/${method.name}`;
    const attributes = { "rpc.system": "grpc", "rpc.service": request.service.typeName, "rpc.method": method.name };
    const started = performance.now();
    cells.inFlight.inc();
    if (!request.stream) {
      const counted = async () => {
        try {
          const response = await next(request);
          cells.finish(started, undefined);
          return response;
        } catch (error) {
          cells.finish(started, error);
          throw error;
        }
      };
      return tracing ? inSpan(spanName, { kind: SpanKind.SERVER, attributes, parent: extractTraceContext(carrierOf(request.header)) }, counted) : counted();
    }
    // One span for the whole stream, with an event at its first message and at its end.
    const span = tracing ? startSpan(spanName, { kind: SpanKind.SERVER, attributes, parent: extractTraceContext(carrierOf(request.header)) }) : undefined;
    let response;
    try {
      response = await next(request);
    } catch (error) {
      if (span) failSpan(span, error);
      span?.end();
      cells.finish(started, error);
      throw error;
    }
    if (!response.stream) return response;
    // A text stream's first message carries its first token.
    const firstEvent = request.service.name === "TextService" ? "first_token" : "first_message";
    let first = true;
    return passThrough(response, {
      map: (message) => {
        if (first) span?.addEvent(firstEvent);
        first = false;
        return message;
      },
      ended: (outcome, error) => {
        if (outcome === "done") span?.addEvent("end");
        if (outcome === "failed" && span) failSpan(span, error);
        cells.finish(started, outcome === "failed" ? error : undefined);
        span?.end();
      },
    });
  };
}
