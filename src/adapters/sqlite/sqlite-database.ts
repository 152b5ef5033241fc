import Database from "better-sqlite3";
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { DependencyUnavailableError } from "../../ports/dependency.js";
import { FileIdentity } from "./file-identity.js";
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
  /** Told once when the file or its WAL is found deleted or replaced under the open database (FileIdentity). */
  readonly onFileLost?: (error: DependencyUnavailableError) => void;
}

export interface SqliteDatabase {
  readonly db: SqliteDb;
  readonly path: string;
  /** Whether `path` (and its WAL) still name the files open here; once not, the connection refuses every write. */
  readonly identity: FileIdentity;
  /** Closes the database, which frees the process lock. Idempotent. */
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
      ? "is in use by another process (one that has the database open: another instance of the service, an sqlite3 shell, a backup)"
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
 * The connections open here. better-sqlite3 closes a connection that is
 * garbage-collected, which would silently free the process lock of a handle
 * nobody references any more: held here, a connection lasts until closed.
 */
const openConnections = new Set<SqliteDb>();

/**
 * Opens the embedded store: WAL journal, the given `synchronous`, a busy
 * timeout and foreign keys, with pending migrations applied.
 *
 * The store belongs to one process at a time, and the lock that says so is
 * SQLite's own on the database file, which the kernel drops when the process
 * dies, however it dies (SIGKILL included); there is no lock file to delete.
 * Every connection to a WAL database holds a shared lock on the file for as
 * long as it is open; opening first takes the exclusive lock (which no other
 * process's connection allows), migrates under it, then turns it into this
 * connection's shared lock without letting go in between (`locking_mode`
 * EXCLUSIVE, then NORMAL, see docs/decisions/0004-sqlite-file-identity-and-lock.md).
 * Other readers stay welcome afterwards: an operator can back the file up
 * online (`sqlite3 service.db ".backup copy.db"`, `VACUUM INTO`), and the
 * checkpointer thread has a connection of its own. (Like SQLite itself, this
 * needs a local filesystem: network filesystems may not honour the locks.)
 *
 * `onFileLost` is told, once, when the file or its WAL is found deleted or
 * replaced (see FileIdentity): from then on the connection is query-only.
 */
export function openSqliteDatabase(options: SqliteDatabaseOptions): SqliteDatabase {
  if (!SYNCHRONOUS.includes(options.synchronous)) {
    throw new Error(`invalid SQLite synchronous mode "${String(options.synchronous)}" (expected ${SYNCHRONOUS.join(", ")})`);
  }
  const path = resolve(options.path);
  const busyTimeoutMs = Math.max(0, Math.floor(options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS));
  try {
    mkdirSync(dirname(path), { recursive: true });
  } catch (error) {
    throw mapSqliteError(error);
  }
  let db: SqliteDb | undefined;
  let identity: FileIdentity;
  try {
    db = new Database(path, { timeout: busyTimeoutMs });
    openConnections.add(db);
    const mode = db.pragma("journal_mode = WAL", { simple: true });
    if (String(mode).toLowerCase() !== "wal") throw new Error(`${path}: could not switch to WAL (journal_mode is ${String(mode)})`);
    takeProcessLock(db, path);
    db.pragma(`synchronous = ${options.synchronous.toUpperCase()}`);
    db.pragma("foreign_keys = ON");
    migrate(db, options.migrationsDir ?? MIGRATIONS);
    // Back to shared: the commit below turns the exclusive lock into this connection's shared one, never letting go.
    db.pragma("locking_mode = NORMAL");
    db.prepare(
      "INSERT OR REPLACE INTO process_holder (id, pid, host, started_at) VALUES (1, ?, ?, ?)",
    ).run(process.pid, hostname(), new Date().toISOString());
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    const opened = db;
    identity = FileIdentity.record([path, `${path}-wal`], (error) => {
      // Every later write fails as SQLITE_READONLY, which the stores already answer as unavailable.
      if (opened.open) opened.pragma("query_only = ON");
      options.onFileLost?.(error);
    });
  } catch (error) {
    if (db) openConnections.delete(db);
    db?.close();
    throw mapSqliteError(error);
  }
  const opened = db;
  let closed = false;
  return {
    db: opened,
    path,
    identity,
    close() {
      if (closed) return;
      closed = true;
      openConnections.delete(opened);
      opened.close();
    },
  };
}

/**
 * Takes the exclusive lock on the database file, or throws DataDirInUseError
 * when any other connection (another process's, or another handle's in this
 * one) has it open. Kept (locking_mode EXCLUSIVE) until the caller returns to
 * NORMAL and commits.
 */
function takeProcessLock(db: SqliteDb, path: string): void {
  // The WAL is opened now, in normal locking mode: entered in exclusive mode, its index would live in this
  // connection's memory for good, and no other connection (the checkpointer, a backup) could read the file.
  db.prepare("SELECT count(*) FROM sqlite_master").get();
  db.pragma("busy_timeout = 0");
  db.pragma("locking_mode = EXCLUSIVE");
  try {
    // A write transaction in exclusive mode takes the file's exclusive lock, refused while any other connection holds its shared one.
    db.exec("BEGIN IMMEDIATE; COMMIT");
  } catch (error) {
    const code = sqliteCodeOf(error);
    if (code?.startsWith("SQLITE_BUSY") || code?.startsWith("SQLITE_LOCKED")) {
      throw new DataDirInUseError(path, holderOf(db), { cause: error });
    }
    throw error;
  }
}

/** The holder as it recorded itself in the database, when that can be read and it still runs (informational only). */
function holderOf(db: SqliteDb): DataDirHolder | undefined {
  let holder: DataDirHolder | undefined;
  try {
    db.pragma("locking_mode = NORMAL");
    holder = db.prepare("SELECT pid, host FROM process_holder WHERE id = 1").get() as DataDirHolder | undefined;
  } catch {
    return undefined;
  }
  if (!holder || holder.host !== hostname() || holder.pid === process.pid) return holder;
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // That process is gone: the one holding the file now is another (an sqlite3 shell, a backup).
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return undefined;
  }
  return holder;
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
