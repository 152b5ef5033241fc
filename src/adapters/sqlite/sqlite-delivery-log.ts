import type { DeliveryAttempt, DeliveryLog, DeliveryRecord, DeliveryState, DeliverySubject } from "../../ports/delivery-log.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";

interface DeliveryRow {
  message_id: string;
  job_id: string;
  account_id: string;
  state: DeliveryState;
  attempts: string;
}

const COLUMNS = "message_id, job_id, account_id, state, attempts";

/** Webhook deliveries per message id; 'delivered' and 'exhausted' are final, set only from 'pending' (or by a redelivery). */
export class SqliteDeliveryLog implements DeliveryLog {
  private readonly statements;
  private readonly recordTx;

  constructor(db: SqliteDb) {
    const s = {
      get: db.prepare(`SELECT ${COLUMNS} FROM webhook_deliveries WHERE message_id = ?`),
      ensure: db.prepare(
        // finish() may come first and know no job or account: the first attempt recorded fills them in.
        `INSERT INTO webhook_deliveries (message_id, job_id, account_id, state, attempts) VALUES (?, ?, ?, 'pending', '[]')
         ON CONFLICT (message_id) DO UPDATE SET job_id = CASE WHEN job_id = '' THEN excluded.job_id ELSE job_id END,
           account_id = CASE WHEN account_id = '' THEN excluded.account_id ELSE account_id END`,
      ),
      setAttempts: db.prepare("UPDATE webhook_deliveries SET attempts = ?, last_at = ? WHERE message_id = ?"),
      finish: db.prepare("UPDATE webhook_deliveries SET state = ? WHERE message_id = ? AND state = 'pending'"),
      redelivered: db.prepare("UPDATE webhook_deliveries SET state = 'delivered' WHERE message_id = ? AND state <> 'delivered'"),
      byAccount: db.prepare(`SELECT ${COLUMNS} FROM webhook_deliveries WHERE account_id = ? ORDER BY last_at DESC, message_id LIMIT ?`),
      exhausted: db.prepare(`SELECT ${COLUMNS} FROM webhook_deliveries WHERE state = 'exhausted' AND job_id <> '' ORDER BY last_at DESC, message_id LIMIT ?`),
    };
    this.statements = s;
    this.recordTx = db.transaction((messageId: string, subject: DeliverySubject, attempt: DeliveryAttempt) => {
      s.ensure.run(messageId, subject.jobId, subject.accountId);
      const row = s.get.get(messageId) as DeliveryRow;
      const attempts = JSON.parse(row.attempts) as unknown[];
      attempts.push({ ...attempt, at: attempt.at.toISOString() });
      s.setAttempts.run(JSON.stringify(attempts), attempt.at.getTime(), messageId);
    });
  }

  async get(messageId: string): Promise<DeliveryRecord | undefined> {
    const row = sqliteCall(() => this.statements.get.get(messageId)) as DeliveryRow | undefined;
    return row && toRecord(row);
  }

  async recordAttempt(messageId: string, subject: DeliverySubject, attempt: DeliveryAttempt): Promise<void> {
    sqliteCall(() => this.recordTx.immediate(messageId, subject, attempt));
  }

  async finish(messageId: string, state: Exclude<DeliveryState, "pending">): Promise<boolean> {
    return sqliteCall(() => {
      this.statements.ensure.run(messageId, "", "");
      return this.statements.finish.run(state, messageId).changes === 1;
    });
  }

  async redelivered(messageId: string): Promise<boolean> {
    return sqliteCall(() => this.statements.redelivered.run(messageId).changes === 1);
  }

  async listByAccount(accountId: string, limit: number): Promise<DeliveryRecord[]> {
    return (sqliteCall(() => this.statements.byAccount.all(accountId, limit)) as DeliveryRow[]).map(toRecord);
  }

  async listExhausted(limit: number): Promise<DeliveryRecord[]> {
    return (sqliteCall(() => this.statements.exhausted.all(limit)) as DeliveryRow[]).map(toRecord);
  }
}

function toRecord(row: DeliveryRow): DeliveryRecord {
  return {
    messageId: row.message_id,
    jobId: row.job_id,
    accountId: row.account_id,
    state: row.state,
    attempts: (JSON.parse(row.attempts) as (DeliveryAttempt & { at: string })[]).map((attempt) => ({ ...attempt, at: new Date(attempt.at) })),
  };
}
