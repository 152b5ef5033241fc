import type { PriceTable } from "../../domain/pricing/price-table.js";
import type { DependencyProbe } from "../../ports/dependency.js";
import type { StorePorts } from "../../ports/stores.js";
import { CassandraApiKeyStore } from "./cassandra-api-key-store.js";
import { CassandraDeliveryLog } from "./cassandra-delivery-log.js";
import { CassandraIdempotencyStore } from "./cassandra-idempotency-store.js";
import { CassandraJobStore } from "./cassandra-job-store.js";
import { CassandraLedger } from "./cassandra-ledger.js";
import { CassandraPanelSessionStore } from "./cassandra-panel-session-store.js";
import { cassandraProbe, openSession, type CassandraSettings } from "./cassandra-session.js";
import { CassandraSettingsStore } from "./cassandra-settings-store.js";
import type { Telemetry } from "../../ports/telemetry.js";
import type { CassandraClient } from "./cassandra-session.js";
import { AffineLedger, startLedgerPeer } from "./affine-ledger.js";
import { LedgerMembers } from "./ledger-members.js";

/**
 * What opening the stores needs: the session's settings and, with CLUSTER_SECRET, this process's part in
 * the ledger's affinity. The runtime passes config's CassandraConfig (CASSANDRA_*, LEDGER_PEER_*), which has
 * this shape; declared here so that the adapter does not import config.
 */
export interface CassandraStoreSettings extends CassandraSettings {
  /** CLUSTER_SECRET set: each account's money operations go to the process that owns the account. */
  readonly ledgerAffinity?: {
    /** The bearer token members present to each other's peer endpoint. */
    readonly secret: string;
    /** This process's member id. */
    readonly memberId: string;
    /** Set: this process owns accounts and serves its peers' forwards at host:port, reached at advertise. */
    readonly serve?: { readonly host: string; readonly port: number; readonly advertise: string };
  };
}

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
    const local = new CassandraLedger(client, Date.now, options.telemetry);
    const affinity = await openAffinity(client, config, local);
    const stores: StorePorts = {
      jobs: new CassandraJobStore(client, options.retentionSeconds),
      ledger: affinity?.ledger ?? local,
      apiKeys: new CassandraApiKeyStore(client),
      panelSessions: new CassandraPanelSessionStore(client),
      idempotency: new CassandraIdempotencyStore(client),
      settings,
      deliveries: new CassandraDeliveryLog(client, options.retentionSeconds),
    };
    const close = async () => {
      await affinity?.close();
      await client.shutdown();
    };
    return { stores, probe: cassandraProbe(client), close };
  } catch (error) {
    await client.shutdown();
    throw error;
  }
}

/**
 * With CLUSTER_SECRET: every account's money operations go to the member
 * that owns the account (AffineLedger); with LEDGER_PEER_PORT too, this
 * process is a member: it serves its peers' forwards and registers. Without
 * a secret, the process commits every operation itself.
 */
async function openAffinity(client: CassandraClient, config: CassandraStoreSettings, local: CassandraLedger) {
  const affinity = config.ledgerAffinity;
  if (!affinity) return undefined;
  const serve = affinity.serve;
  const server = serve ? await startLedgerPeer({ ...serve, secret: affinity.secret, ledger: local }) : undefined;
  const members = new LedgerMembers(client, "ledger", server ? { id: affinity.memberId, address: server.address } : undefined);
  try {
    await members.start();
  } catch (error) {
    await server?.close();
    throw error;
  }
  return {
    ledger: new AffineLedger(local, members, affinity.secret),
    // Out of the members first (the others stop routing here), then the forwards under way finish, then the session closes.
    close: async () => {
      await members.stop().catch(() => undefined);
      await server?.close();
    },
  };
}
