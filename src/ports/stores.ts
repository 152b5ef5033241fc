import type { ApiKeyStore } from "./api-key-store.js";
import type { AuditLog } from "./audit-log.js";
import type { BalanceAlertOutbox } from "./balance-alerts.js";
import type { DeliveryLog } from "./delivery-log.js";
import type { IdempotencyStore } from "./idempotency-store.js";
import type { IntentHolds } from "./intent-holds.js";
import type { JobStore } from "./job-store.js";
import type { Ledger } from "./ledger.js";
import type { PanelSessionStore } from "./panel-session-store.js";
import type { SettingsStore } from "./settings-store.js";

/**
 * The store ports one backend provides together (SQLite, Cassandra): the
 * records half of the core's CorePorts (core/core-deps.ts), the same fields
 * and types. Here, not in the core, so the adapters that open them need not
 * import the core.
 */
export interface StorePorts {
  readonly jobs: JobStore;
  readonly ledger: Ledger;
  /** Intent and hold together: in one write where the stores can (the embedded SQLite file), step by step elsewhere. */
  readonly intentHolds: IntentHolds;
  readonly apiKeys: ApiKeyStore;
  readonly panelSessions: PanelSessionStore;
  readonly idempotency: IdempotencyStore;
  readonly settings: SettingsStore;
  readonly deliveries: DeliveryLog;
  /** The audit trail's reads; its records are written by the stores above, with their changes. */
  readonly audit: AuditLog;
  /** The balance.low outbox (decision 0038), where the ledger writes one. */
  readonly balanceAlerts?: BalanceAlertOutbox;
}
