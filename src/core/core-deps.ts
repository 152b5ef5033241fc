import type { IntentHolds } from "../ports/intent-holds.js";
import type { AcceptanceWrites } from "../ports/acceptance-writes.js";
import type { ValidationLimits } from "../domain/validation/limits.js";
import type { SafetyMinimums } from "../domain/text/safety.js";
import type { ApiKeyStore } from "../ports/api-key-store.js";
import type { AuditLog } from "../ports/audit-log.js";
import type { BlobStore } from "../ports/blob-store.js";
import type { Clock } from "../ports/clock.js";
import type { DeliveryLog } from "../ports/delivery-log.js";
import type { EventBus } from "../ports/event-bus.js";
import type { IdempotencyStore } from "../ports/idempotency-store.js";
import type { InputFetcher } from "../ports/input-fetcher.js";
import type { JobFeed } from "../ports/job-feed.js";
import type { JobStore } from "../ports/job-store.js";
import type { Ledger } from "../ports/ledger.js";
import type { BalanceAlertOutbox } from "../ports/balance-alerts.js";
import type { GenerationProvider } from "../ports/provider.js";
import type { SettingsStore } from "../ports/settings-store.js";
import type { PanelSessionStore } from "../ports/panel-session-store.js";
import type { WebhookTransport } from "../ports/webhook-transport.js";
import type { WriteBarrier } from "../ports/write-barrier.js";
import type { Logger } from "../ports/logger.js";
import type { Telemetry } from "../ports/telemetry.js";
import type { Tracer } from "../ports/tracer.js";

/** Everything the core orchestrates over: ports only, no technology. */
export interface CorePorts {
  readonly jobs: JobStore;
  readonly ledger: Ledger;
  /** An intent with its hold, taken and ended together: one write where the stores can (the embedded SQLite file), the steps one by one behind the port elsewhere. */
  readonly intentHolds: IntentHolds;
  /** An accepted job's intent, hold and job: with its announcement in one write where the stores and the bus can (the embedded file with its own bus), the steps one by one behind the port elsewhere. */
  readonly acceptanceWrites: AcceptanceWrites;
  readonly apiKeys: ApiKeyStore;
  /** The web panel's sessions: a session is valid only while its record is open. */
  readonly panelSessions: PanelSessionStore;
  readonly idempotency: IdempotencyStore;
  readonly settings: SettingsStore;
  readonly bus: EventBus;
  /** Job lifecycle signals heard by every process (watchers, cancels). */
  readonly feed: JobFeed;
  readonly blobs: BlobStore;
  readonly provider: GenerationProvider;
  readonly inputs: InputFetcher;
  readonly webhookTransport: WebhookTransport;
  readonly deliveries: DeliveryLog;
  /** The audit trail's reads (its records ride with the changes: the stores' methods take them). */
  readonly audit: AuditLog;
  /** The balance.low outbox the ledger writes (decision 0038), handed to the webhook dispatcher by the webhooks role; absent where the stores keep none. */
  readonly balanceAlerts?: BalanceAlertOutbox;
  /** Awaited before an answer that acknowledges a write (a 202, a credit): what it acknowledges is on disk. */
  readonly durability: WriteBarrier;
  readonly clock: Clock;
  /** The structured log: problems worth an operator's attention that do not fail the request (a lost event, a late bookkeeping write). */
  readonly logger: Logger;
  /** What happened, for the metrics (jobs, money, webhooks). */
  readonly telemetry: Telemetry;
  /** The spans of a job's trace (acceptance, generation, delivery). */
  readonly tracer: Tracer;
}

export interface CoreSettings {
  readonly adminToken: string;
  readonly limits: ValidationLimits;
  /** The operator's minimum safety threshold per harm category (SAFETY_MIN_THRESHOLDS); none when unset. */
  readonly safetyMinimums?: SafetyMinimums;
  /** Jobs of one account accepted and not yet finished; beyond it acceptance answers 429 (MAX_QUEUED_JOBS_PER_ACCOUNT). */
  readonly maxQueuedJobsPerAccount: number;
  readonly idempotencyTtlMs: number;
  /** Lifetime of a signed result URL. */
  readonly resultUrlTtlSeconds: number;
  readonly urlSigningSecret: Buffer;
  /** Absolute origin for result URLs, e.g. http://127.0.0.1:8080. */
  readonly publicBaseUrl: string;
  readonly retryAfterSeconds: number;
  /** Delays before webhook retries 1..n. */
  readonly webhookRetryScheduleMs: readonly number[];
  readonly webhookTimeoutMs: number;
  /** How long accepting a job may take; a key still being accepted after that belongs to a dead acceptance. */
  readonly acceptTimeoutMs: number;
  /** How long a cancel of a processing job waits for its worker to abort it (CANCEL_GRACE). */
  readonly cancelGraceMs: number;
  /** How long a watcher trusts the job feed alone before reading the job anyway. */
  readonly watchFallbackMs: number;
  /**
   * Set when this process is the only one using its store (the embedded
   * default): everything left unfinished before this instant belongs to a
   * process that is gone, and is recovered at once instead of after a timeout.
   */
  readonly ownsStoreSince?: Date;
}

export interface CoreDeps extends CorePorts {
  readonly settingsOf: CoreSettings;
}
