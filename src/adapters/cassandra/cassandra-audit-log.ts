import { auditDays, auditMatches, type AuditQuery } from "../../domain/audit/audit-query.js";
import type { AuditLog, AuditPage, AuditRecord } from "../../ports/audit-log.js";
import type { CassandraClient } from "./cassandra-session.js";
import { AuditOutbox, auditWrites, bucketOf } from "./audit-outbox.js";

/** The rows of an event, with the change or copied out after it (audit-outbox.ts). */
export { auditWrites };

/**
 * The audit trail on Cassandra: one partition per UTC day (and per account and day), read newest day first. Actor
 * and kind filters are applied to the rows read, so a filtered listing reads the range's partitions until its page
 * is full: its cost is bounded by the range (at most 92 days) and the rows of those days.
 */
export class CassandraAuditLog implements AuditLog {
  private readonly outbox: AuditOutbox;

  constructor(private readonly client: CassandraClient) {
    this.outbox = new AuditOutbox(client);
  }

  async list(query: AuditQuery): Promise<AuditPage> {
    // What crashed writers of conditional writes left is resolved first: a listing never misses an applied change.
    await this.outbox.recover();
    const upper = query.before ? query.before.at : query.to;
    const records: AuditRecord[] = [];
    for (const utcDay of auditDays(query.from, new Date(upper.getTime() + 1))) {
      let pageState: string | undefined;
      do {
        const page = await this.client.execute(
          "SELECT * FROM audit_events WHERE bucket = ? AND at >= ? AND at <= ?",
          [bucketOf(query.accountId, utcDay), query.from, upper],
          { prepare: true, fetchSize: 500, ...(pageState ? { pageState } : {}) },
        );
        for (const row of page.rows) {
          const record: AuditRecord = {
            eventId: row.event_id as string, at: row.at as Date, kind: row.kind as string, actor: row.actor as string,
            clientAddress: (row.client_address as string | null) ?? "", accountId: (row.account_id as string | null) ?? undefined,
            subject: (row.subject as string | null) ?? undefined, before: (row.before_value as string | null) ?? undefined,
            after: (row.after_value as string | null) ?? undefined,
          };
          if (auditMatches(record, query)) records.push(record);
          if (records.length > query.limit) break;
        }
        pageState = records.length > query.limit ? undefined : (page.pageState ?? undefined);
      } while (pageState);
      if (records.length > query.limit) break;
    }
    const listed = records.slice(0, query.limit);
    const last = listed.at(-1);
    return { records: listed, next: records.length > query.limit && last ? { at: last.at, eventId: last.eventId } : undefined };
  }
}
