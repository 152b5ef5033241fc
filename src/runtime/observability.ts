import type { Logger as PinoLogger } from "pino";
import { PrometheusMetrics } from "../adapters/observability/prometheus-metrics.js";
import { otelTracer } from "../adapters/observability/tracing.js";
import { noTracer, type Tracer } from "../ports/tracer.js";

/** What a process reports through: its one logger, its metrics, its traces. */
export interface Observability {
  readonly logger: PinoLogger;
  readonly metrics: PrometheusMetrics;
  readonly tracer: Tracer;
  /** Whether tracing is on (OTEL_EXPORTER_OTLP_ENDPOINT): ports are wrapped in spans only then. */
  readonly tracing: boolean;
}

/** A process's observability: metrics of its own, and OpenTelemetry spans when tracing is on (the SDK is started by main). */
export function createObservability(logger: PinoLogger, tracing: boolean): Observability {
  return { logger, metrics: new PrometheusMetrics(), tracer: tracing ? otelTracer : noTracer, tracing };
}
