import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Observation, Telemetry } from "../../ports/telemetry.js";
import { CounterFamily, GaugeFamily, HistogramFamily } from "./metric-cells.js";

/** Request latencies: sub-millisecond answers to long synchronous text calls. */
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Job waits and generations: seconds to many minutes (video). */
const JOB_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800];
/** Upstream calls, webhook attempts, publishes. */
const CALL_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** One consumer group's lag on one partition (Kafka). */
export interface ConsumerLag {
  readonly group: string;
  readonly topic: string;
  readonly partition: number;
  readonly lag: number;
}

/**
 * Node's own metrics (heap, event-loop lag, GC, handles) describe the
 * process, not a service in it: one set per process, however many services
 * a test starts in it.
 */
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
    // Gauges named like counters (promtool's lint refuses them); the same counts stay, by type, in nodejs_active_handles and friends.
    for (const name of ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"]) {
      processRegistry.removeSingleMetric(name);
    }
  }
  return processRegistry;
}

/**
 * The one home of metric names (Prometheus conventions: base units in the
 * name, `_total` counters). Labels are bounded sets: route templates, methods,
 * status codes, models, outcomes, topics and partitions; never an id, a key
 * or a prompt.
 */
export class PrometheusMetrics implements Telemetry {
  readonly registry = new Registry();

  /** Counted per request: cells (metric-cells.ts), not prom-client's label hashing. */
  readonly http = {
    requests: new CounterFamily<"method" | "route" | "status_code">({
      name: "http_server_requests_total", help: "HTTP requests answered by the gateway, by route template, method and status code.",
      labelNames: ["method", "route", "status_code"], registers: [this.registry],
    }),
    duration: new HistogramFamily<"method" | "route" | "status_code">({
      name: "http_server_request_duration_seconds", help: "Time from a request's arrival to the end of its answer.",
      labelNames: ["method", "route", "status_code"], buckets: REQUEST_BUCKETS, registers: [this.registry],
    }),
    own: new HistogramFamily<"method" | "route">({
      name: "http_server_gateway_duration_seconds",
      help: "The gateway's own share of a request: its whole time minus the time spent waiting for the core (and the core's upstream).",
      labelNames: ["method", "route"], buckets: REQUEST_BUCKETS, registers: [this.registry],
    }),
    core: new HistogramFamily<"method" | "route">({
      name: "http_server_core_duration_seconds", help: "Time a request spent waiting for the core (including the core's upstream calls).",
      labelNames: ["method", "route"], buckets: REQUEST_BUCKETS, registers: [this.registry],
    }),
    inFlight: new GaugeFamily({ name: "http_server_requests_in_flight", help: "Requests being answered by the gateway.", registers: [this.registry] }).cell({}),
  };

  /** Counted per call: cells (metric-cells.ts), not prom-client's label hashing. */
  readonly rpc = {
    requests: new CounterFamily<"service" | "method" | "code">({
      name: "rpc_server_requests_total", help: "Core RPCs handled (from the gateway in-process or over gRPC/Connect), by service, method and code.",
      labelNames: ["service", "method", "code"], registers: [this.registry],
    }),
    duration: new HistogramFamily<"service" | "method" | "code">({
      name: "rpc_server_request_duration_seconds", help: "Time a core RPC took, to its last message.",
      labelNames: ["service", "method", "code"], buckets: REQUEST_BUCKETS, registers: [this.registry],
    }),
    inFlight: new GaugeFamily<"service">({
      name: "rpc_server_requests_in_flight", help: "Core RPCs being handled.", labelNames: ["service"], registers: [this.registry],
    }),
  };

  private readonly jobs = {
    accepted: new Counter({ name: "jobs_accepted_total", help: "Jobs stored and acknowledged (202).", labelNames: ["model"], registers: [this.registry] }),
    started: new Counter({ name: "jobs_started_total", help: "Queued jobs claimed by a worker.", labelNames: ["model"], registers: [this.registry] }),
    finished: new Counter({
      name: "jobs_finished_total", help: "Jobs ended, by model and outcome (succeeded, failed, canceled).",
      labelNames: ["model", "outcome"], registers: [this.registry],
    }),
    queuedTime: new Histogram({
      name: "job_queued_duration_seconds", help: "Time a job waited queued before a worker claimed it.",
      labelNames: ["model"], buckets: JOB_BUCKETS, registers: [this.registry],
    }),
    generatingTime: new Histogram({
      name: "job_generation_duration_seconds", help: "Time from a job's claim to its end.",
      labelNames: ["model"], buckets: JOB_BUCKETS, registers: [this.registry],
    }),
    queued: new Gauge({ name: "jobs_queued", help: "Jobs queued, as of the reaper's last complete scan.", registers: [this.registry] }),
    oldestQueued: new Gauge({
      name: "jobs_oldest_queued_age_seconds", help: "Age of the oldest queued job, as of the reaper's last complete scan (0: none queued).",
      registers: [this.registry],
    }),
    unsettled: new Gauge({
      name: "jobs_unsettled", help: "Jobs that ended but whose money and completion event are not done yet (the settlement backlog), as of the reaper's last complete scan.",
      registers: [this.registry],
    }),
    scanned: new Gauge({
      name: "jobs_last_scan_timestamp_seconds", help: "When the reaper last completed a scan of the unfinished jobs.", registers: [this.registry],
    }),
    takenOver: new Counter({ name: "jobs_taken_over_total", help: "Jobs taken over by the reaper after their worker's lease lapsed.", registers: [this.registry] }),
    reannounced: new Counter({ name: "jobs_reannounced_total", help: "Queued jobs announced again by the reaper.", registers: [this.registry] }),
    fenced: new Counter({
      name: "job_acceptances_fenced_total", help: "Acceptances that died before storing their job, fenced off and their hold released.",
      registers: [this.registry],
    }),
  };

  private readonly money = {
    reservations: new Counter({
      name: "ledger_reservations_total",
      help: "Holds asked for, by outcome (reserved; refused: insufficient_funds and key_limit answer 402, too_many_open_holds 429).",
      labelNames: ["outcome"], registers: [this.registry],
    }),
    settlements: new Counter({ name: "ledger_settlements_total", help: "Holds settled (charged).", registers: [this.registry] }),
    releases: new Counter({ name: "ledger_releases_total", help: "Holds released (nothing charged).", registers: [this.registry] }),
    conflicts: new Counter({
      name: "ledger_cas_conflicts_total", help: "Ledger compare-and-set writes that lost to another writer and were retried (Cassandra).",
      registers: [this.registry],
    }),
    resolved: new Counter({
      name: "ledger_unknown_outcomes_resolved_total", help: "Ledger writes of unknown outcome resolved by reading back what they did (Cassandra).",
      registers: [this.registry],
    }),
    roundOperations: new Histogram({
      name: "ledger_round_operations", help: "Money operations one ledger round carried (Cassandra: one conditional batch per account).",
      buckets: [1, 2, 4, 8, 16, 32, 64, 128], registers: [this.registry],
    }),
    roundTime: new Histogram({
      name: "ledger_round_duration_seconds", help: "Time one ledger round took, lost rounds and their retries included (Cassandra).",
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1], registers: [this.registry],
    }),
    idempotencyReplays: new Counter({
      name: "idempotency_replays_total", help: "Retries answered with the stored response of their Idempotency-Key.", registers: [this.registry],
    }),
    idempotencyRefusals: new Counter({
      name: "idempotency_refusals_total", help: "Idempotency-Key refusals: in_use (409) and reused with another request (422).",
      labelNames: ["reason"], registers: [this.registry],
    }),
  };

  private readonly upstream = {
    calls: new Counter({
      name: "upstream_requests_total", help: "Calls to upstream routes (the vendor, or the simulator), by route, operation and outcome.",
      labelNames: ["route", "operation", "outcome"], registers: [this.registry],
    }),
    duration: new Histogram({
      name: "upstream_request_duration_seconds", help: "Time an upstream call took, to its last byte.",
      labelNames: ["route", "operation"], buckets: CALL_BUCKETS, registers: [this.registry],
    }),
    failovers: new Counter({
      name: "upstream_failovers_total", help: "Calls moved on from a failing route to the next.", labelNames: ["from", "to"], registers: [this.registry],
    }),
    healthy: new Gauge({
      name: "upstream_route_healthy", help: "1 while the router considers a route healthy, 0 while it is skipped.", labelNames: ["route"],
      registers: [this.registry],
    }),
    tokens: new Counter({
      name: "upstream_tokens_total", help: "Tokens reported by upstreams: input (prompt) and output (produced).",
      labelNames: ["route", "direction"], registers: [this.registry],
    }),
  };

  private readonly webhooks = {
    attempts: new Counter({
      name: "webhook_attempts_total", help: "Webhook attempts, by result (status class, timeout or network_error).",
      labelNames: ["result"], registers: [this.registry],
    }),
    attemptTime: new Histogram({
      name: "webhook_attempt_duration_seconds", help: "Time one webhook attempt took.", buckets: CALL_BUCKETS, registers: [this.registry],
    }),
    deliveries: new Counter({
      name: "webhook_deliveries_total", help: "Webhook deliveries ended: delivered, or exhausted (every attempt failed: a dead letter).",
      labelNames: ["outcome"], registers: [this.registry],
    }),
    deferred: new Counter({
      name: "webhook_deferrals_total", help: "Webhook attempts handed back to wait, unsent, by reason (a busy destination, account or process, or an open breaker).",
      labelNames: ["reason"], registers: [this.registry],
    }),
    latency: new Histogram({
      name: "webhook_delivery_latency_seconds", help: "Time from a job's end to its webhook's successful delivery.",
      buckets: JOB_BUCKETS, registers: [this.registry],
    }),
  };

  private readonly bus = {
    publishTime: new Histogram({
      name: "kafka_publish_duration_seconds", help: "Time to publish one message to Kafka (acknowledged).",
      labelNames: ["topic"], buckets: CALL_BUCKETS, registers: [this.registry],
    }),
    publishFailures: new Counter({
      name: "kafka_publish_failures_total", help: "Publishes to Kafka that failed.", labelNames: ["topic"], registers: [this.registry],
    }),
  };

  private lagReader: ((signal: AbortSignal) => Promise<readonly ConsumerLag[]>) | undefined;

  /** Reads consumer lag when scraped: set by the Kafka bus (the embedded bus has no lag to report). */
  consumerLag(read: (signal: AbortSignal) => Promise<readonly ConsumerLag[]>): void {
    this.lagReader = read;
  }

  readonly consumerLagGauge = (() => {
    const metrics = this;
    return new Gauge({
      name: "kafka_consumer_lag", help: "Messages not yet consumed by a consumer group, per topic and partition (end offset minus committed offset).",
      labelNames: ["group", "topic", "partition"], registers: [this.registry],
      async collect() {
        this.reset();
        const read = metrics.lagReader;
        if (!read) return;
        const controller = new AbortController();
        const timer = setTimeout(() => controller.abort(), 2_000);
        try {
          for (const { group, topic, partition, lag } of await read(controller.signal)) this.set({ group, topic, partition: String(partition) }, lag);
        } catch {
          // Kafka unreachable: the gauge is left empty (an absent series, not a false zero); readiness reports the outage.
        } finally {
          clearTimeout(timer);
        }
      },
    });
  })();

  observe(o: Observation): void {
    switch (o.kind) {
      case "job_accepted":
        return this.jobs.accepted.inc({ model: o.model });
      case "job_started":
        this.jobs.started.inc({ model: o.model });
        return this.jobs.queuedTime.observe({ model: o.model }, o.queuedSeconds);
      case "job_finished":
        this.jobs.finished.inc({ model: o.model, outcome: o.outcome });
        if (o.generatingSeconds !== undefined) this.jobs.generatingTime.observe({ model: o.model }, o.generatingSeconds);
        return;
      case "job_taken_over":
        return this.jobs.takenOver.inc();
      case "job_reannounced":
        return this.jobs.reannounced.inc();
      case "acceptance_fenced":
        return this.jobs.fenced.inc();
      case "queue_scanned":
        this.jobs.queued.set(o.queued);
        this.jobs.oldestQueued.set(o.oldestQueuedSeconds);
        this.jobs.unsettled.set(o.unsettled);
        return this.jobs.scanned.set(Date.now() / 1000);
      case "hold_reserved":
        return this.money.reservations.inc({ outcome: o.outcome });
      case "hold_settled":
        return this.money.settlements.inc();
      case "hold_released":
        return this.money.releases.inc();
      case "ledger_conflict":
        return this.money.conflicts.inc();
      case "ledger_outcome_resolved":
        return this.money.resolved.inc();
      case "ledger_round":
        this.money.roundOperations.observe(o.operations);
        return this.money.roundTime.observe(o.seconds);
      case "idempotency":
        if (o.outcome === "replayed") return this.money.idempotencyReplays.inc();
        return this.money.idempotencyRefusals.inc({ reason: o.outcome });
      case "upstream_call":
        this.upstream.calls.inc({ route: o.route, operation: o.operation, outcome: o.outcome });
        return this.upstream.duration.observe({ route: o.route, operation: o.operation }, o.seconds);
      case "upstream_failover":
        return this.upstream.failovers.inc({ from: o.from, to: o.to });
      case "upstream_tokens":
        this.upstream.tokens.inc({ route: o.route, direction: "input" }, o.input);
        return this.upstream.tokens.inc({ route: o.route, direction: "output" }, o.output);
      case "route_health":
        return this.upstream.healthy.set({ route: o.route }, o.healthy ? 1 : 0);
      case "webhook_attempt":
        this.webhooks.attempts.inc({ result: o.result });
        return this.webhooks.attemptTime.observe(o.seconds);
      case "webhook_delivered":
        this.webhooks.deliveries.inc({ outcome: "delivered" });
        return this.webhooks.latency.observe(o.seconds);
      case "webhook_exhausted":
        return this.webhooks.deliveries.inc({ outcome: "exhausted" });
      case "webhook_deferred":
        return this.webhooks.deferred.inc({ reason: o.reason });
      case "bus_publish":
        if (o.ok) return this.bus.publishTime.observe({ topic: o.topic }, o.seconds);
        return this.bus.publishFailures.inc({ topic: o.topic });
    }
  }

  /** The exposition: this service's metrics and the process's. */
  async exposition(): Promise<string> {
    return `${await this.registry.metrics()}\n${await processMetrics().metrics()}`;
  }

  readonly contentType = Registry.PROMETHEUS_CONTENT_TYPE;
}
