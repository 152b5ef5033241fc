import type { ModelPrices, PriceTable } from "../domain/pricing/price-table.js";
import type { AuditRecord } from "./audit-log.js";

export interface WebhookEndpoint {
  readonly url: string;
  /** "whsec_" + base64 secret (Standard Webhooks). */
  readonly secret: string;
}

/**
 * Operator settings: pauses, prices and account webhooks. A change's `audit` record, when given, is written with it in
 * one atomic step (a transaction, a logged batch): both or neither.
 */
export interface SettingsStore {
  isProjectPaused(): Promise<boolean>;
  setProjectPaused(paused: boolean, audit?: AuditRecord): Promise<void>;
  pausedModels(): Promise<ReadonlySet<string>>;
  setModelPaused(model: string, paused: boolean, audit?: AuditRecord): Promise<void>;
  prices(): Promise<PriceTable>;
  setPrices(model: string, prices: ModelPrices): Promise<void>;
  pausedRoutes(): Promise<ReadonlySet<string>>;
  setRoutePaused(route: string, paused: boolean, audit?: AuditRecord): Promise<void>;
  webhook(accountId: string): Promise<WebhookEndpoint | undefined>;
  setWebhook(accountId: string, endpoint: WebhookEndpoint | undefined, audit?: AuditRecord): Promise<void>;
}
