import type { DeliveryAttempt, DeliveryLog, DeliveryRecord, DeliveryState } from "../../ports/delivery-log.js";
import { conditional, serialRead, type CassandraClient } from "./cassandra-session.js";

/** Deliveries live as long as their job (JOB_RETENTION): every write carries that TTL. */
export class CassandraDeliveryLog implements DeliveryLog {
  constructor(
    private readonly client: CassandraClient,
    private readonly retentionSeconds: number,
  ) {}

  async get(messageId: string): Promise<DeliveryRecord | undefined> {
    const row = await serialRead(this.client, "SELECT message_id, job_id, state, attempts FROM webhook_deliveries WHERE message_id = ?", [
      messageId,
    ]);
    if (!row) return undefined;
    return {
      messageId,
      jobId: row.job_id,
      state: row.state as DeliveryState,
      attempts: ((row.attempts as string[] | null) ?? []).map((text) => {
        const attempt = JSON.parse(text) as DeliveryAttempt & { at: string };
        return { ...attempt, at: new Date(attempt.at) };
      }),
    };
  }

  async recordAttempt(messageId: string, jobId: string, attempt: DeliveryAttempt): Promise<void> {
    await this.ensure(messageId, jobId);
    await conditional(this.client, "UPDATE webhook_deliveries USING TTL ? SET attempts = attempts + ? WHERE message_id = ? IF EXISTS", [
      this.retentionSeconds, [JSON.stringify(attempt)], messageId,
    ]);
  }

  async finish(messageId: string, state: Exclude<DeliveryState, "pending">): Promise<boolean> {
    await this.ensure(messageId, "");
    const result = await conditional(this.client, "UPDATE webhook_deliveries USING TTL ? SET state = ? WHERE message_id = ? IF state = 'pending'", [
      this.retentionSeconds, state, messageId,
    ]);
    return result.applied;
  }

  private async ensure(messageId: string, jobId: string): Promise<void> {
    await conditional(
      this.client,
      "INSERT INTO webhook_deliveries (message_id, job_id, state, attempts) VALUES (?, ?, 'pending', []) IF NOT EXISTS USING TTL ?",
      [messageId, jobId, this.retentionSeconds],
    );
  }
}
