import type { AuditCursor, AuditQuery } from "../domain/audit/audit-query.js";

/**
 * One recorded change (issue 39): written by the store in the same transaction (SQLite) or logged batch (Cassandra)
 * as the change itself, never changed afterwards. Values are JSON text; secrets never appear in them.
 */
export interface AuditRecord {
  readonly eventId: string;
  readonly at: Date;
  /** "project.paused", "model.paused", "route.paused", "webhook.set", "webhook.secret_rotated", … */
  readonly kind: string;
  /** "admin", "owner:<account_id>" or "key:<key_id>". */
  readonly actor: string;
  readonly clientAddress: string;
  /** The account it concerns; undefined for project-wide changes. */
  readonly accountId?: string;
  /** What was changed within the kind (a model, a route); undefined when the kind says it all. */
  readonly subject?: string;
  readonly before?: string;
  readonly after?: string;
}

export interface AuditPage {
  readonly records: AuditRecord[];
  /** Set when more records may match below the last one. */
  readonly next?: AuditCursor;
}

/** The audit trail's reads; its writes ride with the changes (the stores' methods take the record). */
export interface AuditLog {
  /** Newest first, within the query's range and filters. */
  list(query: AuditQuery): Promise<AuditPage>;
}
