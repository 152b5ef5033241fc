import type { DeliveryAttempt, DeliveryLog, DeliveryRecord, DeliveryState } from "../../ports/delivery-log.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";

interface DeliveryRow {
  job_id: string;
  state: DeliveryState;
  attempts: string;
}

/** Webhook deliveries per message id; 'delivered' and 'exhausted' are final, set only from 'pending'. */
export class SqliteDeliveryLog implements DeliveryLog {
  private readonly statements;
  private readonly recordTx;

  constructor(db: SqliteDb) {
    const s = {
      get: db.prepare("SELECT job_id, state, attempts FROM webhook_deliveries WHERE message_id = ?"),
      ensure: db.prepare(
        // finish() may come first and know no job id: the first attempt recorded fills it in.
        `INSERT INTO webhook_deliveries (message_id, job_id, state, attempts) VALUES (?, ?, 'pending', '[]')
         ON CONFLICT (message_id) DO UPDATE SET job_id = excluded.job_id WHERE job_id = '' AND excluded.job_id <> ''`,
      ),
      setAttempts: db.prepare("UPDATE webhook_deliveries SET attempts = ? WHERE message_id = ?"),
      finish: db.prepare("UPDATE webhook_deliveries SET state = ? WHERE message_id = ? AND state = 'pending'"),
    };
    this.statements = s;
    this.recordTx = db.transaction((messageId: string, jobId: string, attempt: DeliveryAttempt) => {
      s.ensure.run(messageId, jobId);
      const row = s.get.get(messageId) as DeliveryRow;
      const attempts = JSON.parse(row.attempts) as unknown[];
      attempts.push({ ...attempt, at: attempt.at.toISOString() });
      s.setAttempts.run(JSON.stringify(attempts), messageId);
    });
  }

  async get(messageId: string): Promise<DeliveryRecord | undefined> {
    const row = sqliteCall(() => this.statements.get.get(messageId)) as DeliveryRow | undefined;
    if (!row) return undefined;
    return {
      messageId,
      jobId: row.job_id,
      state: row.state,
      attempts: (JSON.parse(row.attempts) as (DeliveryAttempt & { at: string })[]).map((attempt) => ({
        ...attempt,
        at: new Date(attempt.at),
      })),
    };
  }

  async recordAttempt(messageId: string, jobId: string, attempt: DeliveryAttempt): Promise<void> {
    sqliteCall(() => this.recordTx.immediate(messageId, jobId, attempt));
  }

  async finish(messageId: string, state: Exclude<DeliveryState, "pending">): Promise<boolean> {
    return sqliteCall(() => {
      this.statements.ensure.run(messageId, "");
      return this.statements.finish.run(state, messageId).changes === 1;
    });
  }
}
