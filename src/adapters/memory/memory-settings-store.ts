import type { Money } from "../../domain/money.js";
import type { ModelPrices, PriceTable } from "../../domain/pricing/price-table.js";
import type { ToolPrices } from "../../domain/pricing/tool-prices.js";
import type { SettingsStore, WebhookEndpoint } from "../../ports/settings-store.js";
import type { AuditRecord } from "../../ports/audit-log.js";
import { MemoryAuditLog } from "./memory-audit-log.js";

export class MemorySettingsStore implements SettingsStore {
  private projectPaused = false;
  private readonly paused = new Set<string>();
  private readonly routesPaused = new Set<string>();
  private readonly priceTable: Map<string, ModelPrices>;
  private readonly webhooks = new Map<string, WebhookEndpoint>();
  private readonly toolPriceTable = new Map<string, Money>();

  constructor(initialPrices: PriceTable, private readonly audit = new MemoryAuditLog()) {
    this.priceTable = new Map(initialPrices);
  }

  async isProjectPaused() { return this.projectPaused; }
  async setProjectPaused(paused: boolean, audit?: AuditRecord) {
    this.projectPaused = paused;
    this.audit.append(audit);
  }
  async pausedModels(): Promise<ReadonlySet<string>> { return new Set(this.paused); }
  async setModelPaused(model: string, paused: boolean, audit?: AuditRecord) {
    if (paused) this.paused.add(model);
    else this.paused.delete(model);
    this.audit.append(audit);
  }
  async pausedRoutes(): Promise<ReadonlySet<string>> { return new Set(this.routesPaused); }
  async setRoutePaused(route: string, paused: boolean, audit?: AuditRecord) {
    if (paused) this.routesPaused.add(route);
    else this.routesPaused.delete(route);
    this.audit.append(audit);
  }
  async prices(): Promise<PriceTable> { return new Map(this.priceTable); }
  async setPrices(model: string, prices: ModelPrices, audit?: AuditRecord) {
    this.priceTable.set(model, prices);
    this.audit.append(audit);
  }
  async toolPrices(): Promise<ToolPrices> { return new Map(this.toolPriceTable); }
  async setToolPrice(tool: string, price: Money | undefined, audit?: AuditRecord) {
    if (price === undefined) this.toolPriceTable.delete(tool);
    else this.toolPriceTable.set(tool, price);
    this.audit.append(audit);
  }
  async webhook(accountId: string) { return this.webhooks.get(accountId); }
  async setWebhook(accountId: string, endpoint: WebhookEndpoint | undefined, audit?: AuditRecord) {
    if (endpoint) this.webhooks.set(accountId, endpoint);
    else this.webhooks.delete(accountId);
    this.audit.append(audit);
  }
}
