import type { DeliveryAttempt, DeliveryLog, DeliveryRecord, DeliveryState, DeliverySubject } from "../../ports/delivery-log.js";
import { byLastAttempt } from "../memory/memory-delivery-log.js";
import { conditional, serialRead, type CassandraClient } from "./cassandra-session.js";

/** How many entries of a listing's index are read before sorting by last attempt. */
const INDEX_READ = 1_000;
const DEAD_LETTERS = "all";

/** Deliveries live as long as their job (JOB_RETENTION): every write carries that TTL, their index rows too. */
export class CassandraDeliveryLog implements DeliveryLog {
  constructor(
    private readonly client: CassandraClient,
    private readonly retentionSeconds: number,
  ) {}

  async get(messageId: string): Promise<DeliveryRecord | undefined> {
    const row = await serialRead(this.client, "SELECT message_id, job_id, account_id, state, attempts FROM webhook_deliveries WHERE message_id = ?", [
      messageId,
    ]);
    if (!row) return undefined;
    return {
      messageId,
      jobId: row.job_id ?? "",
      accountId: row.account_id ?? "",
      state: row.state as DeliveryState,
      attempts: ((row.attempts as string[] | null) ?? []).map((text) => {
        const attempt = JSON.parse(text) as DeliveryAttempt & { at: string };
        return { ...attempt, at: new Date(attempt.at) };
      }),
    };
  }

  async recordAttempt(messageId: string, subject: DeliverySubject, attempt: DeliveryAttempt): Promise<void> {
    await this.ensure(messageId, subject.jobId);
    await conditional(this.client, "UPDATE webhook_deliveries USING TTL ? SET attempts = attempts + ?, account_id = ? WHERE message_id = ? IF EXISTS", [
      this.retentionSeconds, [JSON.stringify(attempt)], subject.accountId, messageId,
    ]);
    if (subject.accountId !== "") {
      await this.client.execute("INSERT INTO webhook_deliveries_by_account (account_id, message_id) VALUES (?, ?) USING TTL ?", [
        subject.accountId, messageId, this.retentionSeconds,
      ]);
    }
  }

  async finish(messageId: string, state: Exclude<DeliveryState, "pending">): Promise<boolean> {
    await this.ensure(messageId, "");
    const result = await conditional(this.client, "UPDATE webhook_deliveries USING TTL ? SET state = ? WHERE message_id = ? IF state = 'pending'", [
      this.retentionSeconds, state, messageId,
    ]);
    // A test event that failed is no dead letter: only job deliveries are.
    if (result.applied && state === "exhausted" && (await this.get(messageId))?.jobId) {
      await this.client.execute("INSERT INTO webhook_dead_letters (bucket, message_id) VALUES (?, ?) USING TTL ?", [DEAD_LETTERS, messageId, this.retentionSeconds]);
    }
    return result.applied;
  }

  async redelivered(messageId: string): Promise<boolean> {
    let applied = false;
    for (const from of ["exhausted", "pending"]) {
      const result = await conditional(this.client, "UPDATE webhook_deliveries USING TTL ? SET state = 'delivered' WHERE message_id = ? IF state = ?", [
        this.retentionSeconds, messageId, from,
      ]);
      if (result.applied) {
        applied = true;
        break;
      }
    }
    await this.client.execute("DELETE FROM webhook_dead_letters WHERE bucket = ? AND message_id = ?", [DEAD_LETTERS, messageId]);
    return applied;
  }

  async listByAccount(accountId: string, limit: number): Promise<DeliveryRecord[]> {
    const rows = (await this.client.execute("SELECT message_id FROM webhook_deliveries_by_account WHERE account_id = ? LIMIT ?", [accountId, INDEX_READ])).rows;
    return this.records(rows.map((row) => row.message_id as string), (record) => record.accountId === accountId, limit);
  }

  async listExhausted(limit: number): Promise<DeliveryRecord[]> {
    const rows = (await this.client.execute("SELECT message_id FROM webhook_dead_letters WHERE bucket = ? LIMIT ?", [DEAD_LETTERS, INDEX_READ])).rows;
    return this.records(rows.map((row) => row.message_id as string), (record) => record.state === "exhausted" && record.jobId !== "", limit);
  }

  private async records(ids: string[], keep: (record: DeliveryRecord) => boolean, limit: number): Promise<DeliveryRecord[]> {
    const records = await Promise.all(ids.map((id) => this.get(id)));
    return records.filter((record): record is DeliveryRecord => record !== undefined && keep(record)).sort(byLastAttempt).slice(0, limit);
  }

  private async ensure(messageId: string, jobId: string): Promise<void> {
    await conditional(
      this.client,
      "INSERT INTO webhook_deliveries (message_id, job_id, state, attempts) VALUES (?, ?, 'pending', []) IF NOT EXISTS USING TTL ?",
      [messageId, jobId, this.retentionSeconds],
    );
  }
}
