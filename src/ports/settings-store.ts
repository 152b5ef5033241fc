import type { Money } from "../domain/money.js";
import type { ModelPrices, PriceTable } from "../domain/pricing/price-table.js";
import type { AuditRecord } from "./audit-log.js";
import type { ToolPrices } from "../domain/pricing/tool-prices.js";

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
  setPrices(model: string, prices: ModelPrices, audit?: AuditRecord): Promise<void>;
  /** Per-call prices of the built-in tools the operator offers; read on every call that declares one, so a change is in force at once. */
  toolPrices(): Promise<ToolPrices>;
  /** Sets a built-in tool's per-call price, or removes it (undefined): the tool is refused again. */
  setToolPrice(tool: string, price: Money | undefined, audit?: AuditRecord): Promise<void>;
  pausedRoutes(): Promise<ReadonlySet<string>>;
  setRoutePaused(route: string, paused: boolean, audit?: AuditRecord): Promise<void>;
  webhook(accountId: string): Promise<WebhookEndpoint | undefined>;
  setWebhook(accountId: string, endpoint: WebhookEndpoint | undefined, audit?: AuditRecord): Promise<void>;
}
