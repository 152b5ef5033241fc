import { randomUUID } from "node:crypto";
import type { ClaimOutcome, IdempotencyStore, StoredResponse } from "../../ports/idempotency-store.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";

interface KeyRow {
  fingerprint: string;
  token: string;
  pending: string;
  response: string | null;
  claimed_at: number;
  expires_at: number;
}

function outcomeOf(row: KeyRow): ClaimOutcome {
  if (row.response !== null) {
    return { kind: "completed", fingerprint: row.fingerprint, response: JSON.parse(row.response) as StoredResponse };
  }
  return {
    kind: "in_progress",
    fingerprint: row.fingerprint,
    token: row.token,
    pending: JSON.parse(row.pending) as StoredResponse,
    claimedAt: new Date(row.claimed_at),
  };
}

/**
 * Idempotency keys on SQLite, unique by (scope, key). Claims and takeovers
 * are IMMEDIATE transactions, so of concurrent claims exactly one wins. A key
 * past its expires_at is absent for every read and write (a new claim
 * replaces it) until purgeExpired deletes it.
 */
export class SqliteIdempotencyStore implements IdempotencyStore {
  private readonly statements;
  private readonly claimTx;
  private readonly takeOverTx;

  constructor(
    db: SqliteDb,
    private readonly now: () => number = Date.now,
  ) {
    const s = {
      get: db.prepare(
        "SELECT fingerprint, token, pending, response, claimed_at, expires_at FROM idempotency_keys WHERE scope = ? AND key = ? AND expires_at > ?",
      ),
      put: db.prepare(
        `INSERT OR REPLACE INTO idempotency_keys (scope, key, fingerprint, token, pending, response, claimed_at, expires_at)
         VALUES (?, ?, ?, ?, ?, NULL, ?, ?)`,
      ),
      complete: db.prepare(
        "UPDATE idempotency_keys SET response = ?, expires_at = ? WHERE scope = ? AND key = ? AND token = ? AND expires_at > ?",
      ),
      // Only an uncompleted claim is given back: a completed key stands for a stored job.
      abandon: db.prepare(
        "DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND token = ? AND response IS NULL AND expires_at > ?",
      ),
      purge: db.prepare("DELETE FROM idempotency_keys WHERE expires_at <= ?"),
    };
    this.statements = s;

    const claimFresh = (scope: string, key: string, fingerprint: string, pending: StoredResponse, ttlMs: number, at: number) => {
      const token = randomUUID();
      s.put.run(scope, key, fingerprint, token, JSON.stringify(pending), at, at + ttlMs);
      return { kind: "claimed", token } as const;
    };

    this.claimTx = db.transaction(
      (scope: string, key: string, fingerprint: string, pending: StoredResponse, ttlMs: number): ClaimOutcome => {
        const at = this.now();
        const row = s.get.get(scope, key, at) as KeyRow | undefined;
        return row ? outcomeOf(row) : claimFresh(scope, key, fingerprint, pending, ttlMs, at);
      },
    );

    this.takeOverTx = db.transaction(
      (scope: string, key: string, token: string, fingerprint: string, pending: StoredResponse, ttlMs: number): ClaimOutcome => {
        const at = this.now();
        const row = s.get.get(scope, key, at) as KeyRow | undefined;
        if (!row) return claimFresh(scope, key, fingerprint, pending, ttlMs, at);
        if (row.response === null && row.token === token) return claimFresh(scope, key, fingerprint, pending, ttlMs, at);
        return outcomeOf(row);
      },
    );
  }

  async claim(scope: string, key: string, fingerprint: string, pending: StoredResponse, ttlMs: number): Promise<ClaimOutcome> {
    return sqliteCall(() => this.claimTx.immediate(scope, key, fingerprint, pending, ttlMs));
  }

  async takeOver(
    scope: string, key: string, token: string, fingerprint: string, pending: StoredResponse, ttlMs: number,
  ): Promise<ClaimOutcome> {
    return sqliteCall(() => this.takeOverTx.immediate(scope, key, token, fingerprint, pending, ttlMs));
  }

  async complete(scope: string, key: string, token: string, response: StoredResponse, ttlMs: number): Promise<void> {
    const at = this.now();
    const result = sqliteCall(() => this.statements.complete.run(JSON.stringify(response), at + ttlMs, scope, key, token, at));
    if (result.changes !== 1) throw new Error(`Idempotency-Key ${key} is no longer owned by this request (its claim expired or was taken over)`);
  }

  async abandon(scope: string, key: string, token: string): Promise<void> {
    sqliteCall(() => this.statements.abandon.run(scope, key, token, this.now()));
  }

  async purgeExpired(now: Date): Promise<number> {
    return sqliteCall(() => this.statements.purge.run(now.getTime())).changes;
  }
}
