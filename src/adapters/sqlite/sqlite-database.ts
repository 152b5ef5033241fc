import Database from "better-sqlite3";
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { mapSqliteError, sqliteCodeOf } from "./sqlite-errors.js";

export type SqliteDb = Database.Database;

/** PRAGMA synchronous in WAL mode: "normal" may lose the last commits on power loss (never on a crash), "full" and "extra" do not. */
export type SqliteSynchronous = "normal" | "full" | "extra";
const SYNCHRONOUS: readonly SqliteSynchronous[] = ["normal", "full", "extra"];

export interface SqliteDatabaseOptions {
  /** The database file, e.g. `<DATA_DIR>/service.db`. Its directory is created when missing. */
  readonly path: string;
  readonly synchronous: SqliteSynchronous;
  /** How long a statement waits for a lock held by another connection (an online backup, a checkpoint). Default 5 s. */
  readonly busyTimeoutMs?: number;
  /** Directory of the NNNN_name.sql migrations; defaults to ./migrations next to this module. */
  readonly migrationsDir?: string;
}

export interface SqliteDatabase {
  readonly db: SqliteDb;
  readonly path: string;
  /** Closes the database, then frees the process lock. Idempotent. */
  close(): void;
}

/** Who holds a data directory, as it recorded itself in the database. */
export interface DataDirHolder {
  readonly pid: number;
  readonly host: string;
}

/** Another process (or another open handle in this one) holds the data directory. */
export class DataDirInUseError extends Error {
  constructor(
    readonly path: string,
    readonly holder: DataDirHolder | undefined,
    options?: { cause?: unknown },
  ) {
    const thisProcess = holder?.pid === process.pid && holder.host === hostname();
    const who = !holder
      ? "is in use by another process"
      : thisProcess
        ? `is already open in this process (pid ${holder.pid})`
        : `is in use by another process (pid ${holder.pid}${holder.host === hostname() ? "" : ` on ${holder.host}`})`;
    super(`DATA_DIR ${dirname(path)} ${who}: ${path} belongs to one process at a time; stop the other one or choose another DATA_DIR`, options);
    this.name = "DataDirInUseError";
  }
}

const MIGRATIONS = join(dirname(fileURLToPath(import.meta.url)), "migrations");
const MIGRATION_FILE = /^(\d{4})_[A-Za-z0-9_.-]+\.sql$/;
const DEFAULT_BUSY_TIMEOUT_MS = 5_000;

/**
 * Opens the embedded store: WAL journal, the given `synchronous`, a busy
 * timeout and foreign keys, with pending migrations applied.
 *
 * The store belongs to one process at a time. That is enforced by an OS lock
 * on a separate small file, `<path>.lock`: a SQLite database opened with
 * `locking_mode=EXCLUSIVE` and an exclusive transaction kept open for as long
 * as this handle lives. The OS drops the lock when the process dies, however
 * it dies (SIGKILL included), so a crash never leaves a stale lock behind.
 * (Like SQLite itself, this needs a local filesystem: network filesystems may
 * not honour the locks.)
 * The main database is never locked exclusively, so an operator can back it
 * up online (`sqlite3 service.db ".backup copy.db"`, `VACUUM INTO`).
 */
export function openSqliteDatabase(options: SqliteDatabaseOptions): SqliteDatabase {
  if (!SYNCHRONOUS.includes(options.synchronous)) {
    throw new Error(`invalid SQLite synchronous mode "${String(options.synchronous)}" (expected ${SYNCHRONOUS.join(", ")})`);
  }
  const path = resolve(options.path);
  const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
  try {
    mkdirSync(dirname(path), { recursive: true });
  } catch (error) {
    throw mapSqliteError(error);
  }
  const releaseLock = acquireProcessLock(path);
  let db: SqliteDb | undefined;
  try {
    db = new Database(path, { timeout: busyTimeoutMs });
    const mode = db.pragma("journal_mode = WAL", { simple: true });
    if (String(mode).toLowerCase() !== "wal") throw new Error(`${path}: could not switch to WAL (journal_mode is ${String(mode)})`);
    db.pragma(`synchronous = ${options.synchronous.toUpperCase()}`);
    db.pragma(`busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
    db.pragma("foreign_keys = ON");
    migrate(db, options.migrationsDir ?? MIGRATIONS);
    db.prepare(
      "INSERT OR REPLACE INTO process_holder (id, pid, host, started_at) VALUES (1, ?, ?, ?)",
    ).run(process.pid, hostname(), new Date().toISOString());
  } catch (error) {
    try {
      db?.close();
    } finally {
      releaseLock();
    }
    throw mapSqliteError(error);
  }
  const opened = db;
  let closed = false;
  return {
    db: opened,
    path,
    close() {
      if (closed) return;
      closed = true;
      try {
        opened.close();
      } finally {
        releaseLock();
      }
    },
  };
}

/**
 * The lock connections this process holds. better-sqlite3 closes a connection
 * that is garbage-collected, which would silently free the lock of a handle
 * nobody references any more: held here, a lock lasts until released.
 */
const heldLocks = new Set<SqliteDb>();

/** Takes the process lock of `path` or throws DataDirInUseError; returns the release function. */
function acquireProcessLock(path: string): () => void {
  const lockPath = `${path}.lock`;
  let lock: SqliteDb | undefined;
  try {
    lock = new Database(lockPath, { timeout: 0 });
    lock.pragma("locking_mode = EXCLUSIVE");
    lock.pragma("journal_mode = MEMORY"); // nothing is ever written: no journal file to leave behind
    // The open exclusive transaction is the lock.
    lock.exec("BEGIN EXCLUSIVE");
  } catch (error) {
    lock?.close();
    const code = sqliteCodeOf(error);
    if (code?.startsWith("SQLITE_BUSY") || code?.startsWith("SQLITE_LOCKED")) {
      throw new DataDirInUseError(path, holderOf(path), { cause: error });
    }
    throw mapSqliteError(error);
  }
  const held = lock;
  heldLocks.add(held);
  return () => {
    heldLocks.delete(held);
    if (held.open) held.close(); // closing ends the transaction, which frees the lock
  };
}

/** The holder as it recorded itself in the main database, when that can be read (informational only). */
function holderOf(path: string): DataDirHolder | undefined {
  let db: SqliteDb | undefined;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true, timeout: 1_000 });
    return db.prepare("SELECT pid, host FROM process_holder WHERE id = 1").get() as DataDirHolder | undefined;
  } catch {
    return undefined;
  } finally {
    db?.close();
  }
}

/**
 * Applies the versioned migrations (NNNN_name.sql) not yet recorded in
 * schema_migrations, in order, each in its own transaction with its record.
 */
function migrate(db: SqliteDb, directory: string): void {
  db.exec(`
    CREATE TABLE IF NOT EXISTS schema_migrations (
      version    INTEGER PRIMARY KEY NOT NULL,
      name       TEXT NOT NULL,
      applied_at TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS process_holder (
      id         INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
      pid        INTEGER NOT NULL,
      host       TEXT NOT NULL,
      started_at TEXT NOT NULL
    );
  `);
  const files = readdirSync(directory).filter((file) => MIGRATION_FILE.test(file)).sort();
  const versions = new Map<number, string>();
  for (const file of files) {
    const version = Number(MIGRATION_FILE.exec(file)![1]);
    if (versions.has(version)) throw new Error(`two SQLite migrations have version ${version}: ${versions.get(version)} and ${file}`);
    versions.set(version, file);
  }
  const applied = new Set(
    (db.prepare("SELECT version FROM schema_migrations").all() as { version: number }[]).map((row) => row.version),
  );
  const newest = Math.max(0, ...versions.keys());
  const unknown = [...applied].filter((version) => version > newest);
  if (unknown.length > 0) {
    throw new Error(
      `the SQLite database has schema version ${Math.max(...unknown)}, newer than this build knows (${newest}): run a newer build`,
    );
  }
  const record = db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)");
  for (const [version, file] of versions) {
    if (applied.has(version)) continue;
    const text = readFileSync(join(directory, file), "utf8");
    db.transaction(() => {
      db.exec(text);
      record.run(version, file, new Date().toISOString());
    }).immediate();
  }
}
