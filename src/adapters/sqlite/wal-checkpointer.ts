import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/**
 * The WAL size (in pages) at which the main connection checkpoints by itself
 * after all: only when the checkpointer thread has fallen that far behind
 * (SQLite's default, 1,000 pages, would make every few hundredth commit
 * carry a checkpoint and its fsync of the database file).
 */
export const FALLBACK_AUTOCHECKPOINT_PAGES = 16_384;

export interface WalCheckpointer {
  /** Stops the thread and closes its connection (before the main connection closes, so that one checkpoints last). */
  close(): Promise<void>;
}

/** What the thread runs: PASSIVE never waits for, nor blocks, the main connection's readers and writers. */
const CHECKPOINT = "PRAGMA wal_checkpoint(PASSIVE)";

/**
 * The thread's code, CommonJS run with `eval`: its own connection to the
 * database checkpoints the WAL every `intervalMs`. A checkpoint syncs the WAL
 * before it copies it and the database file after, like the checkpoint it
 * replaces. Failures are reported when they start, then at most once per
 * `reportEveryMs` with how many there were, and their end once: a file that
 * cannot be checkpointed would otherwise log ten lines a second.
 */
const THREAD = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true, timeout: 0 });
db.pragma("synchronous = " + workerData.synchronous);
db.pragma("wal_autocheckpoint = 0");
// A checkpoint copies WAL frames to the database file: it needs no page cache of its own.
db.pragma("cache_size = -64");
let checkpoint;
let failures = 0;
let reportedAt = 0;
const timer = setInterval(() => {
  try {
    (checkpoint ??= db.prepare(workerData.statement)).get();
    if (failures > 0) parentPort.postMessage({ recovered: failures });
    failures = 0;
  } catch (error) {
    failures++;
    const now = Date.now();
    if (failures === 1 || now - reportedAt >= workerData.reportEveryMs) {
      reportedAt = now;
      parentPort.postMessage({ error: String(error && error.message || error), failures });
    }
  }
}, workerData.intervalMs);
parentPort.on("message", (message) => {
  if (message !== "close") return;
  clearInterval(timer);
  db.close();
  parentPort.postMessage({ closed: true });
  parentPort.close();
});
`;

/**
 * Moves SQLite's checkpoints off the event loop. In WAL mode a commit
 * appends to the WAL and, once it holds `wal_autocheckpoint` pages, the
 * committing connection copies it back into the database file and fsyncs
 * that, inside the commit: a stall of milliseconds on the event loop for
 * whichever request commits then (the 1 % tail of a text stream's hold).
 * Here a worker thread with a connection of its own checkpoints instead, and
 * the main connection's own checkpoints are left for a WAL that the thread
 * let grow past FALLBACK_AUTOCHECKPOINT_PAGES (the caller sets that pragma).
 */
export function startWalCheckpointer(options: {
  readonly path: string;
  readonly synchronous: string;
  /** How often the thread checkpoints (default 100 ms). */
  readonly intervalMs?: number;
  /**
   * Checkpoints fail (the thread goes on; the main connection's fallback still
   * bounds the WAL): told when they start failing, then at most once per
   * `reportEveryMs` while they go on, with the failures since they last worked.
   */
  readonly onError?: (message: string, failures: number) => void;
  /** Checkpoints work again after `failures` failed ones. */
  readonly onRecovered?: (failures: number) => void;
  /** Default 60 s. */
  readonly reportEveryMs?: number;
  /** The statement the thread runs (tests give one that fails); default a PASSIVE checkpoint. */
  readonly statement?: string;
}): WalCheckpointer {
  const worker = new Worker(THREAD, {
    eval: true,
    // A few objects and one prepared statement: the smallest heap V8 allows keeps the thread's memory small.
    resourceLimits: { maxYoungGenerationSizeMb: 1, maxOldGenerationSizeMb: 8 },
    stdout: false,
    stderr: false,
    workerData: {
      driver: createRequire(import.meta.url).resolve("better-sqlite3"),
      path: options.path,
      synchronous: options.synchronous.toUpperCase(),
      intervalMs: options.intervalMs ?? 100,
      reportEveryMs: options.reportEveryMs ?? 60_000,
      statement: options.statement ?? CHECKPOINT,
    },
  });
  // A checkpointer alone must not keep the process alive.
  worker.unref();
  const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  worker.on("message", (message: { error?: string; failures?: number; recovered?: number }) => {
    if (message.error) options.onError?.(message.error, message.failures ?? 1);
    if (message.recovered) options.onRecovered?.(message.recovered);
  });
  worker.on("error", (error) => options.onError?.(error.message, 1));
  let closing: Promise<void> | undefined;
  return {
    close: () =>
      (closing ??= (async () => {
        worker.ref(); // waiting for it keeps the process alive until it is gone
        worker.postMessage("close");
        await exited;
      })()),
  };
}
