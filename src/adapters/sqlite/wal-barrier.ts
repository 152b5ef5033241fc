import { open } from "node:fs/promises";
import { DependencyUnavailableError } from "../../ports/dependency.js";
import type { WriteBarrier } from "../../ports/write-barrier.js";

/**
 * Group commit for SQLite in WAL mode. Transactions commit with
 * `synchronous=NORMAL`: their frames are written to the WAL file at commit,
 * without an fsync. `flush()` then makes them durable with one fdatasync of
 * the WAL, run on libuv's thread pool (the event loop goes on), and shared by
 * every caller that arrives while it runs: a flush already in flight may have
 * started before a caller's commit, so such callers share the next one.
 * Checkpoints sync the WAL before copying it and the database after, so what
 * a checkpoint moved is durable too; a missing WAL holds nothing to flush.
 * The file is opened anew for each flush, so a WAL that SQLite recreated is
 * never missed.
 */
export function walBarrier(
  databasePath: string,
  /** The flush itself (tests count and pace it); default: fdatasync of the WAL. */
  sync: () => Promise<void> = () => syncWal(databasePath),
): WriteBarrier & { close(): Promise<void> } {
  let inFlight: Promise<void> | undefined;
  let next: Promise<void> | undefined;

  function flush(): Promise<void> {
    if (!inFlight) {
      inFlight = sync().finally(() => (inFlight = undefined));
      return inFlight;
    }
    next ??= inFlight
      .catch(() => undefined)
      .then(() => {
        next = undefined;
        return flush();
      });
    return next;
  }

  return {
    flush,
    async close() {
      await Promise.allSettled([inFlight, next]);
    },
  };
}

/** The default flush: one fdatasync of `<databasePath>-wal`, opened anew (a missing WAL holds nothing to flush). */
export async function syncWal(databasePath: string): Promise<void> {
  let handle;
  try {
    handle = await open(`${databasePath}-wal`, "r+");
    await handle.datasync();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw new DependencyUnavailableError("sqlite", `flushing the SQLite WAL failed: ${(error as Error).message}`, { cause: error });
  } finally {
    await handle?.close();
  }
}
