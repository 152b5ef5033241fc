import type { ModelPrices, PriceTable } from "../domain/pricing/price-table.js";

export interface WebhookEndpoint {
  readonly url: string;
  /** "whsec_" + base64 secret (Standard Webhooks). */
  readonly secret: string;
}

/** Operator settings: pauses, prices and account webhooks. */
export interface SettingsStore {
  isProjectPaused(): Promise<boolean>;
  setProjectPaused(paused: boolean): Promise<void>;
  pausedModels(): Promise<ReadonlySet<string>>;
  setModelPaused(model: string, paused: boolean): Promise<void>;
  prices(): Promise<PriceTable>;
  setPrices(model: string, prices: ModelPrices): Promise<void>;
  pausedRoutes(): Promise<ReadonlySet<string>>;
  setRoutePaused(route: string, paused: boolean): Promise<void>;
  webhook(accountId: string): Promise<WebhookEndpoint | undefined>;
  setWebhook(accountId: string, endpoint: WebhookEndpoint | undefined): Promise<void>;
}
