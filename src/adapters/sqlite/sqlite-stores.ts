import { join } from "node:path";
import type { PriceTable } from "../../domain/pricing/price-table.js";
import type { DependencyProbe } from "../../ports/dependency.js";
import type { Topic } from "../../ports/event-bus.js";
import type { StorePorts } from "../cassandra/cassandra-stores.js";
import { SqliteApiKeyStore } from "./sqlite-api-key-store.js";
import { openSqliteDatabase, type SqliteDatabase, type SqliteDb, type SqliteSynchronous } from "./sqlite-database.js";
import { SqliteDeliveryLog } from "./sqlite-delivery-log.js";
import { SQLITE_DEPENDENCY, sqliteCall } from "./sqlite-errors.js";
import { SqliteEventBus, createSqliteEventBus, type SqliteEventBusOptions } from "./sqlite-event-bus.js";
import { SqliteIdempotencyStore } from "./sqlite-idempotency-store.js";
import { SqliteIntentHolds } from "./sqlite-intent-holds.js";
import { SqliteAcceptanceWrites } from "./sqlite-acceptance-writes.js";
import { SqliteJobStore } from "./sqlite-job-store.js";
import { SqliteLedger } from "./sqlite-ledger.js";
import { SqlitePanelSessionStore } from "./sqlite-panel-session-store.js";
import { SqliteSettingsStore } from "./sqlite-settings-store.js";
import { walBarrier } from "./wal-barrier.js";
import { GroupedWrites } from "./grouped-writes.js";
import { FALLBACK_AUTOCHECKPOINT_PAGES, startWalCheckpointer } from "./wal-checkpointer.js";
import { NO_BARRIER, type WriteBarrier } from "../../ports/write-barrier.js";

export { createSqliteEventBus, SqliteEventBus, type SqliteEventBusOptions };
export { DataDirInUseError, type SqliteSynchronous } from "./sqlite-database.js";

/** The database file inside DATA_DIR. */
export const SQLITE_FILE = "service.db";

export interface SqliteStoresOptions {
  readonly dataDir: string;
  readonly synchronous: SqliteSynchronous;
  /** The configured prices, stored on first start (see SqliteSettingsStore.seedPrices). */
  readonly defaultPrices: PriceTable;
  /** The bus: delay before a failed handler sees its event again (default 200 ms). */
  readonly redeliveryDelayMs?: number;
  /** The bus: handlers running at once per consumer group (default 128). */
  readonly maxInFlightPerGroup?: number;
  readonly onHandlerError?: (topic: Topic, error: unknown) => void;
  /** How long a statement waits for a lock (default 5 s). */
  readonly busyTimeoutMs?: number;
  /** How often the checkpointer thread checkpoints the WAL (default 100 ms; see wal-checkpointer.ts). */
  readonly checkpointIntervalMs?: number;
  /** Told how many writes each group commit carried (GroupedWrites: acceptances; tests, telemetry). */
  readonly onGroupCommit?: (writes: number) => void;
  /** Checkpoints of the checkpointer thread fail: when they start, then at most once a minute with the count (wal-checkpointer.ts). */
  readonly onCheckpointError?: (message: string, failures: number) => void;
  /** Checkpoints work again after `failures` failed ones. */
  readonly onCheckpointRecovered?: (failures: number) => void;
}

export interface SqliteStores {
  readonly stores: StorePorts;
  /**
   * With synchronous "full": group commit (transactions commit without an
   * fsync; flush() syncs the WAL once for all of them before answers leave).
   * Otherwise nothing to do.
   */
  readonly barrier: WriteBarrier;
  /** The durable in-process bus on the same file (unused, and idle, when another bus is chosen). */
  readonly bus: SqliteEventBus;
  /** An accepted job's writes in one transaction, announcing on `bus`: only for a service whose bus that is. */
  readonly acceptanceWrites: SqliteAcceptanceWrites;
  /** "sqlite": `SELECT 1` on the database. */
  readonly probe: DependencyProbe;
  /** Absolute path of the database file. */
  readonly path: string;
  /** The open database (for tools and tests). */
  readonly database: SqliteDatabase;
  /**
   * Commits the writes waiting for their group commit, and refuses later ones
   * as unavailable: the first step of closing, for a caller that closes the
   * bus itself before close(). Idempotent.
   */
  stopWrites(): void;
  /** Stops the writes, closes the bus (waiting for running handlers), then the database, then frees the process lock. Idempotent. */
  close(): Promise<void>;
}

/** A readiness probe for the embedded store. */
export function sqliteProbe(db: SqliteDb): DependencyProbe {
  const select = db.prepare("SELECT 1");
  return {
    name: SQLITE_DEPENDENCY,
    async check(signal: AbortSignal): Promise<void> {
      signal.throwIfAborted();
      sqliteCall(() => select.get());
    },
  };
}

/**
 * Opens (creating and migrating when needed) `<dataDir>/service.db`, takes
 * the data directory's process lock, seeds prices, and returns every store
 * port and the durable bus on it. Throws DataDirInUseError when another
 * process holds the directory.
 */
export async function openSqliteStores(options: SqliteStoresOptions): Promise<SqliteStores> {
  // "full" is kept by group commit: each transaction commits as NORMAL does, and the barrier
  // fsyncs the WAL once for every commit before an answer (see wal-barrier.ts).
  const groupCommit = options.synchronous === "full";
  const database = openSqliteDatabase({
    path: join(options.dataDir, SQLITE_FILE),
    synchronous: groupCommit ? "normal" : options.synchronous,
    busyTimeoutMs: options.busyTimeoutMs,
  });
  try {
    const { db } = database;
    const settings = new SqliteSettingsStore(db);
    await settings.seedPrices(options.defaultPrices);
    const jobs = new SqliteJobStore(db);
    const ledger = new SqliteLedger(db);
    const writes = new GroupedWrites(db, { onCommit: options.onGroupCommit });
    const stores: StorePorts = {
      jobs,
      ledger,
      intentHolds: new SqliteIntentHolds(db, jobs, ledger, writes),
      apiKeys: new SqliteApiKeyStore(db),
      panelSessions: new SqlitePanelSessionStore(db),
      idempotency: new SqliteIdempotencyStore(db),
      settings,
      deliveries: new SqliteDeliveryLog(db),
    };
    const bus = createSqliteEventBus(db, {
      redeliveryDelayMs: options.redeliveryDelayMs,
      maxInFlightPerGroup: options.maxInFlightPerGroup,
      onHandlerError: options.onHandlerError,
    });
    const wal = groupCommit ? walBarrier(database.path) : undefined;
    // Checkpoints run on a thread of their own; this connection checkpoints only if that one falls far behind.
    db.pragma(`wal_autocheckpoint = ${FALLBACK_AUTOCHECKPOINT_PAGES}`);
    const checkpointer = startWalCheckpointer({
      path: database.path,
      synchronous: groupCommit ? "normal" : options.synchronous,
      intervalMs: options.checkpointIntervalMs,
      onError: options.onCheckpointError,
      onRecovered: options.onCheckpointRecovered,
    });
    let closing: Promise<void> | undefined;
    return {
      stores,
      barrier: wal ?? NO_BARRIER,
      bus,
      acceptanceWrites: new SqliteAcceptanceWrites(jobs, ledger, bus, writes),
      probe: sqliteProbe(db),
      path: database.path,
      database,
      stopWrites: () => writes.close(),
      close: () =>
        (closing ??= (async () => {
          try {
            // Writes still waiting for their group commit (an acceptance publishes on the bus: before it closes).
            writes.close();
            await bus.close();
            await wal?.close();
          } finally {
            // The thread holds a connection of its own: it stops before the database closes, even after a failure.
            await checkpointer.close();
            database.close();
          }
        })()),
    };
  } catch (error) {
    database.close();
    throw error;
  }
}
