/** Span attributes: small scalar facts (a model, a route, a job id), never a secret or a prompt. */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

/** The span a piece of work runs in. */
export interface ActiveSpan {
  /** A point in time inside the span (the first token of a stream, its end). */
  event(name: string, attributes?: SpanAttributes): void;
  setAttributes(attributes: SpanAttributes): void;
}

/** Where a trace stood when work was put aside, to continue it later (see Tracer.capture). */
export type TraceContext = { readonly __traceContext: unique symbol } | undefined;

/**
 * Traces (OpenTelemetry when OTEL_EXPORTER_OTLP_ENDPOINT is set; nothing
 * otherwise). The core names its steps through this port; the edges and the
 * bus carry the context between processes.
 */
export interface Tracer {
  /** Runs `work` in a new span, a child of the current one; a failure marks the span and is rethrown. */
  span<T>(name: string, attributes: SpanAttributes, work: (span: ActiveSpan) => Promise<T>): Promise<T>;
  /** The current context: work that waits in memory (a queued job) continues its own trace, not whoever wakes it. */
  capture(): TraceContext;
  /** Runs `work` with `context` current. */
  within<T>(context: TraceContext, work: () => T): T;
}

const noSpan: ActiveSpan = { event: () => {}, setAttributes: () => {} };

/** Traces nothing. */
export const noTracer: Tracer = {
  span: (_name, _attributes, work) => work(noSpan),
  capture: () => undefined,
  within: (_context, work) => work(),
};
