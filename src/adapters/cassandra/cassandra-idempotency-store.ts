import { randomUUID } from "node:crypto";
import type { ClaimOutcome, IdempotencyStore, StoredResponse } from "../../ports/idempotency-store.js";
import { AmbiguousWriteError, conditional, serialRead, type CassandraClient, type Row } from "./cassandra-session.js";

const COLUMNS = "fingerprint, job_id, owner, pending_job_id, claimed_at";
const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

/**
 * Idempotency keys as rows written only with lightweight transactions. A
 * claim lives as long as the key (the TTL is the key's lifetime from the
 * start), so it never lapses while its job may still be stored.
 */
export class CassandraIdempotencyStore implements IdempotencyStore {
  constructor(private readonly client: CassandraClient) {}

  async claim(scope: string, key: string, fingerprint: string, pending: StoredResponse, ttlMs: number): Promise<ClaimOutcome> {
    const token = randomUUID();
    try {
      const result = await conditional(
        this.client,
        "INSERT INTO idempotency_keys (scope, key, fingerprint, owner, pending_job_id, claimed_at) VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS USING TTL ?",
        [scope, key, fingerprint, token, pending.jobId, new Date(), seconds(ttlMs)],
      );
      return result.applied ? { kind: "claimed", token } : outcomeOf(result.current);
    } catch (error) {
      if (!(error instanceof AmbiguousWriteError)) throw error;
      // The serial read completes any in-flight round: the key is ours exactly when it names our token.
      const row = await this.read(scope, key);
      if (row?.owner === token) return { kind: "claimed", token };
      if (row) return outcomeOf(row);
      throw error;
    }
  }

  async takeOver(
    scope: string, key: string, token: string, fingerprint: string, pending: StoredResponse, ttlMs: number,
  ): Promise<ClaimOutcome> {
    const next = randomUUID();
    try {
      const result = await conditional(
        this.client,
        "UPDATE idempotency_keys USING TTL ? SET fingerprint = ?, owner = ?, pending_job_id = ?, claimed_at = ? WHERE scope = ? AND key = ? IF owner = ? AND job_id = null",
        [seconds(ttlMs), fingerprint, next, pending.jobId, new Date(), scope, key, token],
      );
      if (result.applied) return { kind: "claimed", token: next };
    } catch (error) {
      if (!(error instanceof AmbiguousWriteError)) throw error;
      const row = await this.read(scope, key);
      if (row?.owner === next) return { kind: "claimed", token: next };
    }
    // Someone else moved the key (or it is gone): look at it as a new request would.
    return this.claim(scope, key, fingerprint, pending, ttlMs);
  }

  async complete(scope: string, key: string, token: string, response: StoredResponse, ttlMs: number): Promise<void> {
    const row = await this.read(scope, key);
    // Every cell is rewritten with the key's TTL (the owner too), so the whole row lives as long as the key.
    const result = await conditional(
      this.client,
      "UPDATE idempotency_keys USING TTL ? SET fingerprint = ?, job_id = ?, owner = ? WHERE scope = ? AND key = ? IF owner = ?",
      [seconds(ttlMs), row?.fingerprint ?? "", response.jobId, token, scope, key, token],
    );
    if (!result.applied) throw new Error(`Idempotency-Key ${key} is no longer owned by this request`);
  }

  async abandon(scope: string, key: string, token: string): Promise<void> {
    // Only an uncompleted claim is given back: a completed key stands for a stored job.
    await conditional(this.client, "DELETE FROM idempotency_keys WHERE scope = ? AND key = ? IF owner = ? AND job_id = null", [scope, key, token]);
  }

  /** Keys expire by their TTL. */
  async purgeExpired(): Promise<number> {
    return 0;
  }

  private read(scope: string, key: string): Promise<Row | undefined> {
    return serialRead(this.client, `SELECT ${COLUMNS} FROM idempotency_keys WHERE scope = ? AND key = ?`, [scope, key]);
  }
}

function outcomeOf(row: Row | undefined): ClaimOutcome {
  const fingerprint = (row?.fingerprint as string | undefined) ?? "";
  if (row?.job_id) return { kind: "completed", fingerprint, response: { jobId: row.job_id as string } };
  return {
    kind: "in_progress",
    fingerprint,
    token: (row?.owner as string | undefined) ?? "",
    pending: { jobId: (row?.pending_job_id as string | undefined) ?? "" },
    // A claim from before schema version 3 names no job: it is never treated as dead (its short TTL ends it).
    claimedAt: row?.pending_job_id ? ((row.claimed_at as Date | null) ?? new Date(0)) : new Date(8.64e15),
  };
}
