import { findModel } from "../../domain/catalog/models.js";
import { parseMoney, type Money } from "../../domain/money.js";
import { formatToolPrice, TOOL_PRICE_KEY_PREFIX, type ToolPrices } from "../../domain/pricing/tool-prices.js";
import type { ModelPrices, ModelPricesText, PriceTable } from "../../domain/pricing/price-table.js";
import { formatModelPrices, parseModelPrices } from "../../domain/pricing/price-table.js";
import type { SettingsStore, WebhookEndpoint } from "../../ports/settings-store.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";
import type { AuditRecord } from "../../ports/audit-log.js";
import { SqliteAuditLog } from "./sqlite-audit-log.js";

/**
 * Operator settings on SQLite: pauses, prices of models and built-in tools (JSON in the decimal-string form) and account webhooks.
 * The pauses and the price table are read on every request and change rarely: they are kept in
 * memory once read and dropped by every write. That is exact, not eventually so: only this process
 * opens the database (sqlite-database.ts holds an exclusive lock on it), so every write passes here.
 */
export class SqliteSettingsStore implements SettingsStore {
  private readonly statements;
  private readonly seedTx;
  /** A change and its audit record in one transaction. */
  private readonly audited: (change: () => void, audit: AuditRecord | undefined) => void;
  private cachedPrices: PriceTable | undefined;
  private cachedToolPrices: ToolPrices | undefined;
  private cachedProjectPaused: boolean | undefined;
  private cachedPausedModels: ReadonlySet<string> | undefined;
  private cachedPausedRoutes: ReadonlySet<string> | undefined;

  constructor(db: SqliteDb, audit = new SqliteAuditLog(db)) {
    const s = {
      project: db.prepare("SELECT value FROM project_settings WHERE name = ?").pluck(),
      setProject: db.prepare("INSERT OR REPLACE INTO project_settings (name, value) VALUES (?, ?)"),
      pausedModels: db.prepare("SELECT model FROM model_pauses").pluck(),
      pauseModel: db.prepare("INSERT OR IGNORE INTO model_pauses (model) VALUES (?)"),
      resumeModel: db.prepare("DELETE FROM model_pauses WHERE model = ?"),
      pausedRoutes: db.prepare("SELECT route FROM route_pauses").pluck(),
      pauseRoute: db.prepare("INSERT OR IGNORE INTO route_pauses (route) VALUES (?)"),
      resumeRoute: db.prepare("DELETE FROM route_pauses WHERE route = ?"),
      prices: db.prepare("SELECT model, prices FROM prices"),
      seedPrice: db.prepare("INSERT OR IGNORE INTO prices (model, prices) VALUES (?, ?)"),
      setPrice: db.prepare("INSERT OR REPLACE INTO prices (model, prices) VALUES (?, ?)"),
      deletePrice: db.prepare("DELETE FROM prices WHERE model = ?"),
      webhook: db.prepare("SELECT url, secret FROM webhooks WHERE account_id = ?"),
      setWebhook: db.prepare("INSERT OR REPLACE INTO webhooks (account_id, url, secret) VALUES (?, ?, ?)"),
      deleteWebhook: db.prepare("DELETE FROM webhooks WHERE account_id = ?"),
    };
    this.statements = s;
    const tx = db.transaction((change: () => void, record: AuditRecord | undefined) => {
      change();
      audit.append(record);
    });
    this.audited = (change, record) => sqliteCall(() => tx.immediate(change, record));
    this.seedTx = db.transaction((defaults: PriceTable) => {
      for (const [model, prices] of defaults) s.seedPrice.run(model, JSON.stringify(formatModelPrices(prices)));
    });
  }

  /**
   * The configured prices become a model's first price; a model that already
   * has one (an admin may have changed it) keeps it. Like the Cassandra
   * store's seeding, a model new to the configuration gets its price on the
   * next start.
   */
  async seedPrices(defaults: PriceTable): Promise<void> {
    this.cachedPrices = undefined;
    sqliteCall(() => this.seedTx.immediate(defaults));
  }

  async isProjectPaused(): Promise<boolean> {
    return (this.cachedProjectPaused ??= sqliteCall(() => this.statements.project.get("paused")) === "true");
  }

  async setProjectPaused(paused: boolean, audit?: AuditRecord): Promise<void> {
    this.cachedProjectPaused = undefined;
    this.audited(() => this.statements.setProject.run("paused", String(paused)), audit);
  }

  async pausedModels(): Promise<ReadonlySet<string>> {
    return (this.cachedPausedModels ??= new Set(sqliteCall(() => this.statements.pausedModels.all()) as string[]));
  }

  async setModelPaused(model: string, paused: boolean, audit?: AuditRecord): Promise<void> {
    this.cachedPausedModels = undefined;
    this.audited(() => (paused ? this.statements.pauseModel : this.statements.resumeModel).run(model), audit);
  }

  async pausedRoutes(): Promise<ReadonlySet<string>> {
    return (this.cachedPausedRoutes ??= new Set(sqliteCall(() => this.statements.pausedRoutes.all()) as string[]));
  }

  async setRoutePaused(route: string, paused: boolean, audit?: AuditRecord): Promise<void> {
    this.cachedPausedRoutes = undefined;
    this.audited(() => (paused ? this.statements.pauseRoute : this.statements.resumeRoute).run(route), audit);
  }

  /** The table is shared between callers: it is never mutated (setPrices replaces it). */
  async prices(): Promise<PriceTable> {
    if (this.cachedPrices) return this.cachedPrices;
    const rows = sqliteCall(() => this.statements.prices.all()) as { model: string; prices: string }[];
    const table = new Map<string, ModelPrices>();
    for (const row of rows) {
      const model = findModel(row.model);
      if (model) table.set(model.id, parseModelPrices(model, JSON.parse(row.prices) as ModelPricesText));
    }
    this.cachedPrices = table;
    return table;
  }

  async setPrices(model: string, prices: ModelPrices, audit?: AuditRecord): Promise<void> {
    this.cachedPrices = undefined;
    this.audited(() => this.statements.setPrice.run(model, JSON.stringify(formatModelPrices(prices))), audit);
  }

  /** A tool's price is a row of the prices table keyed "tool:<name>" (no model id has a colon), {"per_call": "<decimal>"}. */
  async toolPrices(): Promise<ToolPrices> {
    if (this.cachedToolPrices) return this.cachedToolPrices;
    const rows = sqliteCall(() => this.statements.prices.all()) as { model: string; prices: string }[];
    const table = new Map<string, Money>();
    for (const row of rows) {
      if (!row.model.startsWith(TOOL_PRICE_KEY_PREFIX)) continue;
      table.set(row.model.slice(TOOL_PRICE_KEY_PREFIX.length), parseMoney((JSON.parse(row.prices) as { per_call: string }).per_call));
    }
    this.cachedToolPrices = table;
    return table;
  }

  async setToolPrice(tool: string, price: Money | undefined, audit?: AuditRecord): Promise<void> {
    this.cachedToolPrices = undefined;
    const key = TOOL_PRICE_KEY_PREFIX + tool;
    this.audited(() => {
      if (price === undefined) this.statements.deletePrice.run(key);
      else this.statements.setPrice.run(key, JSON.stringify({ per_call: formatToolPrice(price) }));
    }, audit);
  }

  async webhook(accountId: string): Promise<WebhookEndpoint | undefined> {
    const row = sqliteCall(() => this.statements.webhook.get(accountId)) as WebhookEndpoint | undefined;
    return row ? { url: row.url, secret: row.secret } : undefined;
  }

  async setWebhook(accountId: string, endpoint: WebhookEndpoint | undefined, audit?: AuditRecord): Promise<void> {
    this.audited(() => {
      if (endpoint) this.statements.setWebhook.run(accountId, endpoint.url, endpoint.secret);
      else this.statements.deleteWebhook.run(accountId);
    }, audit);
  }
}
