import { AsyncResource } from "node:async_hooks";
import { DependencyUnavailableError } from "../../ports/dependency.js";
import type { SqliteDb } from "./sqlite-database.js";
import { mapSqliteError, SQLITE_DEPENDENCY } from "./sqlite-errors.js";

interface Pending {
  readonly write: () => unknown;
  /** The caller's async context, which the write runs in. */
  readonly context: AsyncResource;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

export interface GroupedWritesOptions {
  /** The most writes one transaction carries; the rest wait for the next (default 128). */
  readonly maxPerTransaction?: number;
  /** Told how many writes each committed transaction carried, those that failed alone included (tests, telemetry). */
  readonly onCommit?: (writes: number) => void;
  /**
   * Asked before each group's transaction; when it throws, every write of the
   * group is refused with that error and nothing is written (the database
   * file was deleted under the process: FileIdentity.verify).
   */
  readonly verify?: () => void;
}

/**
 * Group commit on the event loop: the writes asked for during one turn of the
 * loop (every request whose I/O arrived in it) commit in one IMMEDIATE
 * transaction, run at the turn's end (`setImmediate`), in the order asked.
 *
 * A commit's cost is mostly the pages it writes to the WAL, and concurrent
 * writes share most of theirs (the account row, the tails of the ledger and
 * its indexes; decision 0023).
 *
 * The embedded store groups its acceptances (SqliteAcceptanceWrites): their
 * 202 waits for the WAL's fsync anyway (the WriteBarrier), so waiting for the
 * turn's end costs them nothing a client sees. Text calls' holds and their
 * ends are grouped too (SqliteIntentHolds): a hold waits for its turn's end
 * before the upstream call, which pays where a commit's syscalls are dear.
 *
 * Each write runs as a savepoint of the group: one that throws is rolled back
 * alone and its caller gets the error, while the others commit. It runs in
 * its caller's async context (the trace an acceptance's bus event records is
 * its own request's, not the first of the turn's). If the group's
 * transaction itself fails (the commit, or an error after which SQLite rolled
 * the whole transaction back), every write in it fails with that error and
 * none of them is kept. Errors reach callers as the store's other calls give them
 * (`mapSqliteError`: 503 material for a busy, full or unreadable file).
 * Nothing else writes between a write and its commit: the group runs
 * synchronously from BEGIN to COMMIT.
 */
export class GroupedWrites {
  private pending: Pending[] = [];
  private scheduled = false;
  private closed = false;
  private readonly maxPerTransaction: number;
  private readonly group: { immediate(writes: readonly Pending[], outcomes: Outcome[]): void };

  constructor(db: SqliteDb, private readonly options: GroupedWritesOptions = {}) {
    this.maxPerTransaction = Math.max(1, options.maxPerTransaction ?? 128);
    const savepoint = db.transaction((pending: Pending) => pending.context.runInAsyncScope(pending.write));
    this.group = db.transaction((writes: readonly Pending[], outcomes: Outcome[]) => {
      for (const pending of writes) {
        try {
          outcomes.push({ ok: true, value: savepoint(pending) });
        } catch (error) {
          // SQLite ended the whole transaction (a full disk, an I/O error): the group fails as one.
          if (!db.inTransaction) throw error;
          outcomes.push({ ok: false, error });
        }
      }
    });
  }

  /** Runs `write` (synchronous work on this database) in the next group; settles once the group committed. */
  run<T>(write: () => T): Promise<T> {
    if (this.closed) return Promise.reject(new DependencyUnavailableError(SQLITE_DEPENDENCY, "the SQLite store is closing"));
    return new Promise<T>((resolve, reject) => {
      // A resource, not AsyncResource.bind: on Node 20 bind defines a deprecated getter and setter on every bound function,
      // a cost on every grouped write (decision 0023).
      this.pending.push({ write, context: new AsyncResource("GroupedWrite"), resolve: resolve as (value: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.commit());
      }
    });
  }

  /** Commits what is waiting now, at once, and refuses later writes as unavailable (the store is closing). Idempotent. */
  close(): void {
    this.closed = true;
    while (this.pending.length > 0) this.commit();
  }

  private commit(): void {
    if (this.pending.length === 0) return;
    const writes = this.pending.length > this.maxPerTransaction ? this.pending.splice(0, this.maxPerTransaction) : this.pending;
    if (writes === this.pending) this.pending = [];
    if (this.pending.length > 0) setImmediate(() => this.commit());
    else this.scheduled = false;
    const outcomes: Outcome[] = [];
    try {
      this.options.verify?.();
      this.group.immediate(writes, outcomes);
    } catch (error) {
      const failure = mapSqliteError(error);
      for (const pending of writes) pending.reject(failure);
      return;
    }
    writes.forEach((pending, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) pending.resolve(outcome.value);
      else pending.reject(mapSqliteError(outcome.error));
    });
    try {
      this.options.onCommit?.(writes.length);
    } catch {
      // Telemetry's failure is not the writes': they committed, and their callers know it.
    }
  }
}

type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };
