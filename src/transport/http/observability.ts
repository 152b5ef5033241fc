import type { IncomingHttpHeaders } from "node:http";
import type { Span } from "@opentelemetry/api";

// What the gateway reports through, declared here so transport imports no adapter: src/runtime passes in the
// adapters' objects (adapters/observability), which satisfy these interfaces structurally.

/** The labels of a request's cells: its method, its route template, its status code. */
export interface RequestLabels {
  readonly method: string;
  readonly route: string;
  readonly status_code: string;
}

/** A metric family of the gateway: the cell of one label set, the same cell every time it is asked for. */
export interface RequestFamily<Cell> {
  cell(labels: RequestLabels): Cell;
}

export type CounterCell = { inc(): void };
export type HistogramCell = { observe(seconds: number): void };

/** The http_server_* metrics every request is counted into. */
export interface HttpMetrics {
  /** http_server_requests_total */
  readonly requests: RequestFamily<CounterCell>;
  /** http_server_request_duration_seconds */
  readonly duration: RequestFamily<HistogramCell>;
  /** http_server_gateway_duration_seconds (by method and route: the family ignores the status code) */
  readonly own: RequestFamily<HistogramCell>;
  /** http_server_core_duration_seconds (by method and route) */
  readonly core: RequestFamily<HistogramCell>;
  /** http_server_requests_in_flight */
  readonly inFlight: { inc(): void; dec(): void };
}

/** The process's metrics as the gateway and the metrics port use them: count requests, serve the exposition. */
export interface GatewayMetrics {
  readonly http: HttpMetrics;
  /** The Prometheus text exposition of the process. */
  exposition(): Promise<string>;
  /** Its content type (text format 0.0.4). */
  readonly contentType: string;
}

/** The scrape side alone (the metrics port of a process without the gateway). */
export type MetricsExposition = Pick<GatewayMetrics, "exposition" | "contentType">;

/** Spans of the gateway's requests, when tracing is on. */
export interface RequestTracing {
  /** A server span for a request (not made current: the gateway does), continuing its `traceparent` or a new trace. */
  startServerSpan(name: string, headers: IncomingHttpHeaders, attributes: Readonly<Record<string, string>>): Span;
}
