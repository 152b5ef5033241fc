import {
  context, INVALID_SPAN_CONTEXT, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span,
} from "@opentelemetry/api";
import type { ActiveSpan, SpanAttributes, TraceContext, Tracer } from "../../ports/tracer.js";

/** The instrumentation scope of every span this service makes. */
const SCOPE = "generation-service";
const tracer = () => trace.getTracer(SCOPE);

/**
 * Whether startTracing has run. Until then every span is the API's no-op,
 * and inSpan hands its work the one no-op span without making a span and a
 * context per call (decision 0023).
 */
let tracingStarted = false;
const NO_SPAN: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

export interface TracingSettings {
  /** OTEL_EXPORTER_OTLP_ENDPOINT: the collector's base URL; spans go to `<endpoint>/v1/traces` as OTLP protobuf over HTTP. */
  readonly endpoint: string;
  /** OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: the full URL of the traces endpoint, when it is not `<endpoint>/v1/traces`. */
  readonly tracesEndpoint?: string;
  /** OTEL_SERVICE_NAME, or generation-service-<roles>. */
  readonly serviceName: string;
  /** Sent with every export (OTEL_EXPORTER_OTLP_HEADERS). */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * Turns tracing on for the process: the OpenTelemetry SDK with an OTLP
 * (protobuf over HTTP) exporter, batching spans; W3C trace context is the
 * propagation format (traceparent, tracestate), and the context follows
 * async work (AsyncLocalStorage). Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set;
 * the SDK and the exporter are loaded only then (a process without tracing
 * has only the API's no-op tracer in memory).
 */
export async function startTracing(settings: TracingSettings): Promise<{ shutdown(): Promise<void> }> {
  const [{ OTLPTraceExporter }, { resourceFromAttributes }, { BatchSpanProcessor, NodeTracerProvider }] = await Promise.all([
    import("@opentelemetry/exporter-trace-otlp-proto"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/sdk-trace-node"),
  ]);
  const url = settings.tracesEndpoint ?? `${settings.endpoint.replace(/\/+$/, "")}/v1/traces`;
  const exporter = new OTLPTraceExporter({ url, headers: { ...settings.headers } });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": settings.serviceName }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 500 })],
  });
  provider.register();
  tracingStarted = true;
  return { shutdown: () => provider.shutdown() };
}

const attributesOf = (attributes: SpanAttributes | undefined): Attributes => {
  const defined: Attributes = {};
  for (const [name, value] of Object.entries(attributes ?? {})) if (value !== undefined) defined[name] = value;
  return defined;
};

function handleOf(span: Span): ActiveSpan {
  return {
    event: (name, attributes) => void span.addEvent(name, attributesOf(attributes)),
    setAttributes: (attributes) => void span.setAttributes(attributesOf(attributes)),
  };
}

/** Runs `work` in an active span; a thrown error marks it failed (its message only: never a request's content). */
export async function inSpan<T>(
  name: string, options: { kind?: SpanKind; attributes?: SpanAttributes; parent?: Context },
  work: (span: Span) => Promise<T>,
): Promise<T> {
  if (!tracingStarted) return work(NO_SPAN);
  const parent = options.parent ?? context.active();
  return tracer().startActiveSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: attributesOf(options.attributes) }, parent, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      throw error;
    } finally {
      span.end();
    }
  });
}

/** Starts a span that is not made current (a stream's, ended by its last message): the caller ends it. */
export function startSpan(name: string, options: { kind?: SpanKind; attributes?: SpanAttributes; parent?: Context }): Span {
  return tracer().startSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: attributesOf(options.attributes) }, options.parent ?? context.active());
}

/**
 * The gateway's request spans (transport's RequestTracing): a server span
 * continuing the trace an incoming request's headers carry, or a new trace;
 * not made current (the gateway makes it current around the request's hooks).
 */
export const requestSpans = {
  startServerSpan: (name: string, headers: Readonly<Record<string, unknown>>, attributes: SpanAttributes): Span =>
    startSpan(name, { kind: SpanKind.SERVER, parent: extractTraceContext(headers, ROOT_CONTEXT), attributes }),
};

/** Marks a span failed with an error's message. */
export function failSpan(span: Span, error: unknown): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}

/** The core's Tracer port, on OpenTelemetry. */
export const otelTracer: Tracer = {
  span: (name, attributes, work) => inSpan(name, { attributes }, (span) => work(handleOf(span))),
  capture: () => context.active() as unknown as TraceContext,
  within: (captured, work) => (captured ? context.with(captured as unknown as Context, work) : work()),
};

/** Writes the current trace context into message or request headers (traceparent, tracestate). */
export function injectTraceContext(headers: Record<string, string>): Record<string, string> {
  propagation.inject(context.active(), headers);
  return headers;
}

/** The trace context that headers carry (an incoming request's, a message's), or the current one when they carry none. */
export function extractTraceContext(headers: Readonly<Record<string, unknown>>, base: Context = context.active()): Context {
  return propagation.extract(base, headers, {
    keys: (carrier) => Object.keys(carrier),
    get: (carrier, key) => {
      const value = carrier[key];
      if (typeof value === "string") return value;
      if (Buffer.isBuffer(value)) return value.toString();
      return Array.isArray(value) ? (value as unknown[]).map(String) : undefined;
    },
  });
}

/** Runs a consumer's handling of a message in a span continuing the trace the message carries. */
export function consumeInSpan<T>(name: string, headers: Readonly<Record<string, unknown>>, attributes: SpanAttributes, work: () => Promise<T>): Promise<T> {
  return inSpan(name, { kind: SpanKind.CONSUMER, attributes, parent: extractTraceContext(headers, ROOT_CONTEXT) }, () => work());
}

/** The current trace's id (for log lines), when a span is active. */
export function currentTraceIds(): { trace_id: string; span_id: string } | undefined {
  const span = trace.getActiveSpan();
  if (!span) return undefined;
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

/**
 * Wraps a port (a store, the ledger) so that each call of an async method is
 * a span named `<component>.<method>`. Only when tracing is on: otherwise the
 * port is used as it is.
 */
export function tracedPort<T extends object>(port: T, component: string): T {
  return new Proxy(port, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || typeof property !== "string") return value;
      return function traced(this: unknown, ...args: unknown[]) {
        const parent = context.active();
        if (!trace.getSpan(parent)) return value.apply(target, args); // no trace to add to (a background pass)
        // Not made active: a store has no spans of its own below it, and a method that answers at once stays synchronous.
        const span = tracer().startSpan(`${component}.${property}`, { kind: SpanKind.CLIENT, attributes: { component } }, parent);
        const failed = (error: unknown) => {
          span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
          span.end();
          throw error;
        };
        let result: unknown;
        try {
          result = value.apply(target, args);
        } catch (error) {
          failed(error);
        }
        if (result instanceof Promise) {
          return result.then((answer) => {
            span.end();
            return answer;
          }, failed);
        }
        span.end();
        return result;
      };
    },
  });
}

export { SpanKind };
