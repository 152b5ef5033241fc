import { randomUUID } from "node:crypto";
import type { ClaimOutcome, IdempotencyStore, StoredResponse } from "../../ports/idempotency-store.js";
import { AmbiguousWriteError, conditional, serialRead, type CassandraClient, type Row } from "./cassandra-session.js";

/** A claim lives this long while its request is being accepted; a crashed acceptance frees the key after it. */
const CLAIM_TTL_SECONDS = 120;

export class CassandraIdempotencyStore implements IdempotencyStore {
  constructor(private readonly client: CassandraClient) {}

  async claim(scope: string, key: string, fingerprint: string, ttlMs: number): Promise<ClaimOutcome> {
    try {
      // The row marker keeps this TTL even after complete() extends the cells, so it must not outlive the key.
      const claimTtl = Math.max(1, Math.min(CLAIM_TTL_SECONDS, Math.ceil(ttlMs / 1000)));
      const token = randomUUID();
      const result = await conditional(
        this.client,
        "INSERT INTO idempotency_keys (scope, key, fingerprint, owner) VALUES (?, ?, ?, ?) IF NOT EXISTS USING TTL ?",
        [scope, key, fingerprint, token, claimTtl],
      );
      if (result.applied) return { kind: "claimed", token };
      return this.outcomeOf(result.current);
    } catch (error) {
      if (!(error instanceof AmbiguousWriteError)) throw error;
      // Whether our claim or a concurrent twin's won is unknowable; "in progress" makes the client retry safely.
      const row = await serialRead(this.client, "SELECT fingerprint, job_id FROM idempotency_keys WHERE scope = ? AND key = ?", [scope, key]);
      return row ? this.outcomeOf(row) : { kind: "in_progress", fingerprint };
    }
  }

  async complete(scope: string, key: string, token: string, response: StoredResponse, ttlMs: number): Promise<void> {
    const row = await serialRead(this.client, "SELECT fingerprint FROM idempotency_keys WHERE scope = ? AND key = ?", [scope, key]);
    // Every cell is rewritten with the long TTL (the owner too), so the whole row lives as long as the key.
    const result = await conditional(
      this.client,
      "UPDATE idempotency_keys USING TTL ? SET fingerprint = ?, job_id = ?, owner = ? WHERE scope = ? AND key = ? IF owner = ?",
      [Math.ceil(ttlMs / 1000), row?.fingerprint ?? "", response.jobId, token, scope, key, token],
    );
    if (!result.applied) throw new Error(`Idempotency-Key ${key} is no longer owned by this request (its claim expired)`);
  }

  async abandon(scope: string, key: string, token: string): Promise<void> {
    await conditional(this.client, "DELETE FROM idempotency_keys WHERE scope = ? AND key = ? IF owner = ?", [scope, key, token]);
  }

  private outcomeOf(row: Row | undefined): ClaimOutcome {
    const fingerprint = (row?.fingerprint as string | undefined) ?? "";
    return row?.job_id ? { kind: "completed", fingerprint, response: { jobId: row.job_id as string } } : { kind: "in_progress", fingerprint };
  }
}
