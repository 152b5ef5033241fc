import type { PriceTable } from "../../domain/pricing/price-table.js";
import type { DependencyProbe } from "../../ports/dependency.js";
import type { StorePorts } from "../../ports/stores.js";
import { CassandraApiKeyStore } from "./cassandra-api-key-store.js";
import { CassandraDeliveryLog } from "./cassandra-delivery-log.js";
import { CassandraIdempotencyStore } from "./cassandra-idempotency-store.js";
import { CassandraJobStore } from "./cassandra-job-store.js";
import { CassandraLedger } from "./ledger/cassandra-ledger.js";
import { CassandraPanelSessionStore } from "./cassandra-panel-session-store.js";
import { cassandraProbe, openSession, type CassandraSettings } from "./cassandra-session.js";
import { CassandraSettingsStore } from "./cassandra-settings-store.js";
import { CassandraAuditLog } from "./cassandra-audit-log.js";
import { StepwiseIntentHolds } from "../shared/stepwise-intent-holds.js";
import type { Telemetry } from "../../ports/telemetry.js";

/**
 * What opening the stores needs: the session's settings. The runtime passes config's CassandraConfig
 * (CASSANDRA_*), which has this shape; declared here so that the adapter does not import config.
 */
export type CassandraStoreSettings = CassandraSettings;

export interface OpenStores {
  readonly stores: StorePorts;
  readonly probe: DependencyProbe;
  close(): Promise<void>;
}

/** Connects, creates and migrates the schema, seeds prices, and returns every store port on Cassandra. */
export async function openCassandraStores(
  config: CassandraStoreSettings, options: { defaultPrices: PriceTable; retentionSeconds: number; telemetry?: Telemetry },
): Promise<OpenStores> {
  const client = await openSession(config);
  try {
    const settings = new CassandraSettingsStore(client);
    await settings.seedPrices(options.defaultPrices);
    const jobs = new CassandraJobStore(client, options.retentionSeconds);
    const ledger = new CassandraLedger(client, Date.now, options.telemetry);
    const stores: StorePorts = {
      jobs,
      ledger,
      // Jobs and money are apart on Cassandra: the steps one by one behind the port.
      intentHolds: new StepwiseIntentHolds(jobs, ledger),
      apiKeys: new CassandraApiKeyStore(client),
      panelSessions: new CassandraPanelSessionStore(client),
      idempotency: new CassandraIdempotencyStore(client),
      settings,
      deliveries: new CassandraDeliveryLog(client, options.retentionSeconds),
      audit: new CassandraAuditLog(client),
      balanceAlerts: ledger,
    };
    const close = () => client.shutdown();
    return { stores, probe: cassandraProbe(client), close };
  } catch (error) {
    await client.shutdown();
    throw error;
  }
}
