import { join } from "node:path";
import type { PriceTable } from "../../domain/pricing/price-table.js";
import type { DependencyProbe, DependencyUnavailableError } from "../../ports/dependency.js";
import type { Topic } from "../../ports/event-bus.js";
import type { StorePorts } from "../../ports/stores.js";
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
import { SqliteAuditLog } from "./sqlite-audit-log.js";
import { syncWal, walBarrier } from "./wal-barrier.js";
import { GroupedWrites } from "./grouped-writes.js";
import { FALLBACK_AUTOCHECKPOINT_PAGES, startWalCheckpointer } from "./wal-checkpointer.js";
import type { WriteBarrier } from "../../ports/write-barrier.js";
import type { FileIdentity } from "./file-identity.js";

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
  /** Told once when service.db or its WAL is found deleted or replaced under the open store: it writes nothing more (FileIdentity). */
  readonly onFileLost?: (error: DependencyUnavailableError) => void;
}

export interface SqliteStores {
  readonly stores: StorePorts;
  /**
   * With synchronous "full": group commit (transactions commit without an
   * fsync; flush() syncs the WAL once for all of them before answers leave).
   * In every mode, flush() refuses (unavailable) once the file or its WAL is
   * no longer the one written: an answer never acknowledges a deleted file.
   */
  readonly barrier: WriteBarrier;
  /** The durable in-process bus on the same file (unused, and idle, when another bus is chosen). */
  readonly bus: SqliteEventBus;
  /** An accepted job's writes in one transaction, announcing on `bus`: only for a service whose bus that is. */
  readonly acceptanceWrites: SqliteAcceptanceWrites;
  /** "sqlite": the file is still the one open (FileIdentity), and `SELECT 1` on it. */
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

/** A readiness probe for the embedded store: down once its file was deleted under it, or while it cannot be read. */
export function sqliteProbe(db: SqliteDb, identity: FileIdentity): DependencyProbe {
  const select = db.prepare("SELECT 1");
  return {
    name: SQLITE_DEPENDENCY,
    async check(signal: AbortSignal): Promise<void> {
      signal.throwIfAborted();
      identity.verify();
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
    onFileLost: options.onFileLost,
  });
  try {
    const { db, identity } = database;
    const audit = new SqliteAuditLog(db);
    const settings = new SqliteSettingsStore(db, audit);
    await settings.seedPrices(options.defaultPrices);
    const jobs = new SqliteJobStore(db);
    const ledger = new SqliteLedger(db, Date.now, audit);
    const writes = new GroupedWrites(db, { onCommit: options.onGroupCommit, verify: () => identity.verify() });
    const stores: StorePorts = {
      jobs,
      ledger,
      intentHolds: new SqliteIntentHolds(db, jobs, ledger, writes),
      apiKeys: new SqliteApiKeyStore(db, audit),
      panelSessions: new SqlitePanelSessionStore(db, audit),
      idempotency: new SqliteIdempotencyStore(db),
      settings,
      deliveries: new SqliteDeliveryLog(db),
      audit,
      balanceAlerts: ledger,
    };
    const bus = createSqliteEventBus(db, {
      redeliveryDelayMs: options.redeliveryDelayMs,
      maxInFlightPerGroup: options.maxInFlightPerGroup,
      onHandlerError: options.onHandlerError,
    });
    // Checked after the fsync, once for every answer that shares it: the WAL synced by name was the one written,
    // and every commit before the check went to files that outlive the process.
    const wal = groupCommit
      ? walBarrier(database.path, async () => {
          await syncWal(database.path);
          identity.verify();
        })
      : undefined;
    const barrier: WriteBarrier = wal ?? { flush: async () => identity.verify() };
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
      barrier,
      bus,
      acceptanceWrites: new SqliteAcceptanceWrites(jobs, ledger, bus, writes),
      probe: sqliteProbe(db, identity),
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
