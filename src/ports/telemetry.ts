/**
 * What the service reports for its metrics: one observation per thing that
 * happened, named in the domain's words. The adapter (Prometheus) turns them
 * into counters and histograms; labels come only from the bounded fields
 * here (a model, a route, an outcome), never an id, a key or a prompt.
 */
export type Observation =
  /** A job stored and acknowledged (202). */
  | { readonly kind: "job_accepted"; readonly model: string }
  /** A worker claimed a queued job, after it waited `queuedSeconds`. */
  | { readonly kind: "job_started"; readonly model: string; readonly queuedSeconds: number }
  /** A job reached its end; `generatingSeconds` when it was generated (not a cancel of a queued job). */
  | { readonly kind: "job_finished"; readonly model: string; readonly outcome: JobOutcome; readonly generatingSeconds?: number }
  /** A worker took over a job whose lease lapsed (its worker died). */
  | { readonly kind: "job_taken_over" }
  /** The reaper announced a queued job again (its first announcement may have been lost). */
  | { readonly kind: "job_reannounced" }
  /** An acceptance that died before storing its job was fenced off and its hold released. */
  | { readonly kind: "acceptance_fenced" }
  /**
   * The reaper finished a scan of the unfinished jobs: what is queued, the
   * oldest queued job's age, and the jobs that ended but are not settled yet.
   */
  | { readonly kind: "queue_scanned"; readonly queued: number; readonly oldestQueuedSeconds: number; readonly unsettled: number }
  /** A money hold taken or refused. */
  | { readonly kind: "hold_reserved"; readonly outcome: ReserveResult }
  | { readonly kind: "hold_settled" }
  | { readonly kind: "hold_released" }
  /** The ledger's compare-and-set lost to another writer and was retried (Cassandra). */
  | { readonly kind: "ledger_conflict" }
  /** A ledger write of unknown outcome (a timeout) was resolved by reading back what it did (Cassandra). */
  | { readonly kind: "ledger_outcome_resolved" }
  /** One round of an account's money (Cassandra): the operations it carried and how long it took, lost rounds included. */
  | { readonly kind: "ledger_round"; readonly operations: number; readonly seconds: number }
  /** An Idempotency-Key answered a retry: a replay of the stored response, or a 409/422. */
  | { readonly kind: "idempotency"; readonly outcome: "replayed" | "in_use" | "reused" }
  /** One call to an upstream route (the vendor, or the simulator). */
  | {
      readonly kind: "upstream_call"; readonly route: string; readonly operation: UpstreamOperation;
      readonly outcome: "ok" | "error"; readonly seconds: number;
    }
  /** A call moved on from a route that failed to the next one. */
  | { readonly kind: "upstream_failover"; readonly from: string; readonly to: string }
  /** Tokens an upstream reported: prompt (in) and produced (out). */
  | { readonly kind: "upstream_tokens"; readonly route: string; readonly input: number; readonly output: number }
  /** A route's health as the router sees it. */
  | { readonly kind: "route_health"; readonly route: string; readonly healthy: boolean }
  /** One webhook attempt and how it ended. */
  | { readonly kind: "webhook_attempt"; readonly result: WebhookResult; readonly seconds: number }
  /** A webhook delivery ended: delivered (after `seconds` since its event), or exhausted (a dead letter). */
  | { readonly kind: "webhook_delivered"; readonly seconds: number }
  | { readonly kind: "webhook_exhausted" }
  /** A webhook attempt handed back to the bus to wait, unsent: its destination, account or process was at its limit, or the destination's breaker is open. */
  | { readonly kind: "webhook_deferred"; readonly reason: "destination_busy" | "account_busy" | "process_busy" | "breaker_open" }
  /** A message published to the bus (Kafka). */
  | { readonly kind: "bus_publish"; readonly topic: string; readonly ok: boolean; readonly seconds: number };

export type JobOutcome = "succeeded" | "failed" | "canceled";
export type ReserveResult = "reserved" | "insufficient_funds" | "key_limit" | "too_many_open_holds" | "unknown_account";
export type UpstreamOperation = "image" | "video" | "text";
/** A webhook attempt's answer by status class, or why there was none. */
export type WebhookResult = "2xx" | "3xx" | "4xx" | "5xx" | "timeout" | "network_error";

export interface Telemetry {
  observe(observation: Observation): void;
}

/** Reports nothing. */
export const noTelemetry: Telemetry = { observe: () => {} };
