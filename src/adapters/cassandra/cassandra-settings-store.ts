import type { ModelPrices, ModelPricesText, PriceTable } from "../../domain/pricing/price-table.js";
import { formatModelPrices, parseModelPrices } from "../../domain/pricing/price-table.js";
import { findModel } from "../../domain/catalog/models.js";
import { parseMoney, type Money } from "../../domain/money.js";
import { formatToolPrice, TOOL_PRICE_KEY_PREFIX, type ToolPrices } from "../../domain/pricing/tool-prices.js";
import type { SettingsStore, WebhookEndpoint } from "../../ports/settings-store.js";
import { conditional, type CassandraClient } from "./cassandra-session.js";
import type { AuditRecord } from "../../ports/audit-log.js";
import { auditWrites } from "./cassandra-audit-log.js";
import { AuditOutbox, type OutboxEntry } from "./audit-outbox.js";

type Params = Parameters<CassandraClient["loggedBatch"]>[0][number]["params"];

/** A plain write with its audit rows: one logged batch, so the change and its record land together or not at all. */
const audited = (query: string, params: unknown[], audit: AuditRecord | undefined) =>
  [{ query, params }, ...auditWrites(audit)].map((write) => ({ query: write.query, params: write.params as Params }));

/** A prices row's upsert by conditional writes (UPDATE IF EXISTS, else INSERT IF NOT EXISTS), with the event's outbox entry. */
async function upsertPrice(client: CassandraClient, key: string, text: string | null, entry: OutboxEntry | undefined): Promise<boolean> {
  const prepare = { prepare: true };
  const set = entry ? `prices = ?, ${entry.set}` : "prices = ?";
  const params = entry ? [text, entry.param, key] : [text, key];
  const updated = await conditional(client, `UPDATE prices SET ${set} WHERE model = ? IF EXISTS`, params, prepare);
  if (updated.applied || text === null) return updated.applied;
  const inserted = entry
    ? await conditional(client, "INSERT INTO prices (model, prices, audit_outbox) VALUES (?, ?, ?) IF NOT EXISTS", [key, text, entry.param], prepare)
    : await conditional(client, "INSERT INTO prices (model, prices) VALUES (?, ?) IF NOT EXISTS", [key, text], prepare);
  return inserted.applied;
}

export class CassandraSettingsStore implements SettingsStore {
  private readonly outbox: AuditOutbox;

  constructor(private readonly client: CassandraClient) {
    this.outbox = new AuditOutbox(client);
  }

  /** The configured prices become the table's first values; later starts keep what admins changed. */
  async seedPrices(defaults: PriceTable): Promise<void> {
    for (const [model, prices] of defaults) {
      await conditional(this.client, "INSERT INTO prices (model, prices) VALUES (?, ?) IF NOT EXISTS", [
        model, JSON.stringify(formatModelPrices(prices)),
      ]);
    }
  }

  async isProjectPaused(): Promise<boolean> {
    const row = (await this.client.execute("SELECT value FROM project_settings WHERE name = 'paused'")).first();
    return row?.value === "true";
  }

  async setProjectPaused(paused: boolean, audit?: AuditRecord): Promise<void> {
    await this.client.loggedBatch(audited("INSERT INTO project_settings (name, value) VALUES ('paused', ?)", [String(paused)], audit));
  }

  async pausedModels(): Promise<ReadonlySet<string>> {
    const rows = await this.client.execute("SELECT model, paused FROM model_pauses");
    return new Set(rows.rows.filter((r) => r.paused === true).map((r) => r.model as string));
  }

  async setModelPaused(model: string, paused: boolean, audit?: AuditRecord): Promise<void> {
    await this.client.loggedBatch(audited("INSERT INTO model_pauses (model, paused) VALUES (?, ?)", [model, paused], audit));
  }

  async pausedRoutes(): Promise<ReadonlySet<string>> {
    const rows = await this.client.execute("SELECT route, paused FROM route_pauses");
    return new Set(rows.rows.filter((r) => r.paused === true).map((r) => r.route as string));
  }

  async setRoutePaused(route: string, paused: boolean, audit?: AuditRecord): Promise<void> {
    await this.client.loggedBatch(audited("INSERT INTO route_pauses (route, paused) VALUES (?, ?)", [route, paused], audit));
  }

  async prices(): Promise<PriceTable> {
    const rows = await this.client.execute("SELECT model, prices FROM prices");
    const table = new Map<string, ModelPrices>();
    for (const row of rows.rows) {
      const model = row.prices == null ? undefined : findModel(row.model as string);
      if (model) table.set(model.id, parseModelPrices(model, JSON.parse(row.prices as string) as ModelPricesText));
    }
    return table;
  }

  /** A conditional write: its event rides in the row's outbox (AuditOutbox). */
  async setPrices(model: string, prices: ModelPrices, audit?: AuditRecord): Promise<void> {
    const text = JSON.stringify(formatModelPrices(prices));
    await this.outbox.conditional(audit, { table: "prices", column: "model", key: model }, (entry) => upsertPrice(this.client, model, text, entry));
  }

  /**
   * A tool's price is a row of the prices table keyed "tool:<name>" (no model id has a colon), {"per_call": "<decimal>"};
   * read from the table on every call, so every process sees a change at once. Written with the same conditional writes as model prices.
   */
  async toolPrices(): Promise<ToolPrices> {
    const rows = await this.client.execute("SELECT model, prices FROM prices");
    const table = new Map<string, Money>();
    for (const row of rows.rows) {
      const key = row.model as string;
      // A removed price is a row without prices (its outbox may still be there).
      if (!key.startsWith(TOOL_PRICE_KEY_PREFIX) || row.prices == null) continue;
      table.set(key.slice(TOOL_PRICE_KEY_PREFIX.length), parseMoney((JSON.parse(row.prices as string) as { per_call: string }).per_call));
    }
    return table;
  }

  /** A removal sets the row's prices to null (IF EXISTS), so that its event has a row to ride in. */
  async setToolPrice(tool: string, price: Money | undefined, audit?: AuditRecord): Promise<void> {
    const key = TOOL_PRICE_KEY_PREFIX + tool;
    const text = price === undefined ? null : JSON.stringify({ per_call: formatToolPrice(price) });
    await this.outbox.conditional(audit, { table: "prices", column: "model", key }, (entry) => upsertPrice(this.client, key, text, entry));
  }

  async webhook(accountId: string): Promise<WebhookEndpoint | undefined> {
    const row = (await this.client.execute("SELECT url, secret FROM webhooks WHERE account_id = ?", [accountId])).first();
    return row ? { url: row.url ?? "", secret: row.secret } : undefined;
  }

  async setWebhook(accountId: string, endpoint: WebhookEndpoint | undefined, audit?: AuditRecord): Promise<void> {
    await this.client.loggedBatch(endpoint
      ? audited("INSERT INTO webhooks (account_id, url, secret) VALUES (?, ?, ?)", [accountId, endpoint.url, endpoint.secret], audit)
      : audited("DELETE FROM webhooks WHERE account_id = ?", [accountId], audit));
  }
}
