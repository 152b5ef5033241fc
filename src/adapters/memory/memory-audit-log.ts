import { auditMatches, newerFirst, type AuditQuery } from "../../domain/audit/audit-query.js";
import type { AuditLog, AuditPage, AuditRecord } from "../../ports/audit-log.js";

/** The audit trail in memory: the stores that change something append here in the same synchronous step. */
export class MemoryAuditLog implements AuditLog {
  private readonly records: AuditRecord[] = [];

  append(record: AuditRecord | undefined): void {
    if (record) this.records.push(record);
  }

  async list(query: AuditQuery): Promise<AuditPage> {
    const matching = this.records.filter((record) => auditMatches(record, query)).sort(newerFirst);
    const records = matching.slice(0, query.limit);
    const last = records.at(-1);
    return { records, next: matching.length > query.limit && last ? { at: last.at, eventId: last.eventId } : undefined };
  }
}
