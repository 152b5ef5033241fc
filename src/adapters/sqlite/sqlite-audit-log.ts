import type { AuditQuery } from "../../domain/audit/audit-query.js";
import type { AuditLog, AuditPage, AuditRecord } from "../../ports/audit-log.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";

interface Row {
  event_id: string;
  at_ms: number;
  kind: string;
  actor: string;
  client_address: string;
  account_id: string | null;
  subject: string | null;
  before_value: string | null;
  after_value: string | null;
}

const recordOf = (row: Row): AuditRecord => ({
  eventId: row.event_id, at: new Date(row.at_ms), kind: row.kind, actor: row.actor, clientAddress: row.client_address,
  accountId: row.account_id ?? undefined, subject: row.subject ?? undefined, before: row.before_value ?? undefined, after: row.after_value ?? undefined,
});

/** The audit trail in the embedded file: `append` runs inside the caller's transaction (the change's own). */
export class SqliteAuditLog implements AuditLog {
  private readonly insert;
  private readonly page;

  constructor(db: SqliteDb) {
    this.insert = db.prepare(`INSERT INTO audit_events (event_id, at_ms, kind, actor, client_address, account_id, subject, before_value, after_value)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    // Each filter applies only when given (NULL); the cursor is (at_ms, event_id) strictly below the previous page's last.
    this.page = db.prepare(`SELECT * FROM audit_events
      WHERE at_ms >= @from AND at_ms < @to
        AND (@account IS NULL OR account_id = @account) AND (@actor IS NULL OR actor = @actor) AND (@kind IS NULL OR kind = @kind)
        AND (@beforeAt IS NULL OR at_ms < @beforeAt OR (at_ms = @beforeAt AND event_id < @beforeId))
      ORDER BY at_ms DESC, event_id DESC LIMIT @limit`);
  }

  /** Synchronous: call it inside the transaction of the change it records. */
  append(record: AuditRecord | undefined): void {
    if (!record) return;
    this.insert.run(record.eventId, record.at.getTime(), record.kind, record.actor, record.clientAddress,
      record.accountId ?? null, record.subject ?? null, record.before ?? null, record.after ?? null);
  }

  async list(query: AuditQuery): Promise<AuditPage> {
    const rows = sqliteCall(() => this.page.all({
      from: query.from.getTime(), to: query.to.getTime(), account: query.accountId ?? null, actor: query.actor ?? null, kind: query.kind ?? null,
      beforeAt: query.before?.at.getTime() ?? null, beforeId: query.before?.eventId ?? null, limit: query.limit + 1,
    })) as Row[];
    const records = rows.slice(0, query.limit).map(recordOf);
    const last = records.at(-1);
    return { records, next: rows.length > query.limit && last ? { at: last.at, eventId: last.eventId } : undefined };
  }
}
