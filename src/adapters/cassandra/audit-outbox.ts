import type { AuditRecord } from "../../ports/audit-log.js";
import type { CassandraClient } from "./cassandra-session.js";

const INSERT = `INSERT INTO audit_events (bucket, at, event_id, kind, actor, client_address, account_id, subject, before_value, after_value)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

const day = (at: Date) => at.toISOString().slice(0, 10);
export const bucketOf = (accountId: string | undefined, utcDay: string) => (accountId === undefined ? `all:${utcDay}` : `account:${accountId}:${utcDay}`);

/** The rows a record is written as: the day's listing, and the account's day when it concerns one (migration 0016). */
export function auditWrites(record: AuditRecord | undefined): { query: string; params: unknown[] }[] {
  if (!record) return [];
  const values = [record.at, record.eventId, record.kind, record.actor, record.clientAddress,
    record.accountId ?? null, record.subject ?? null, record.before ?? null, record.after ?? null];
  const buckets = [bucketOf(undefined, day(record.at)), ...(record.accountId === undefined ? [] : [bucketOf(record.accountId, day(record.at))])];
  return buckets.map((bucket) => ({ query: INSERT, params: [bucket, ...values] }));
}

/**
 * Where a conditional write keeps its audit event (migration 0017): the audit_outbox map of the row it changes (a
 * table whose key is one text column), or the journal of an account's ledger round (a credit's entry carries it).
 */
export type OutboxTarget = { readonly table: "prices" | "api_keys"; readonly column: string; readonly key: string } | { readonly ledger: string };

/** The outbox entry a conditional write sets with its change: `SET …, audit_outbox = audit_outbox + ?` and its parameter. */
export interface OutboxEntry {
  readonly set: string;
  readonly param: Record<string, string>;
}

const PENDING = "pending";
/** A pending event younger than this may still have its conditional write in flight: recovery leaves it to its writer. */
export const RECOVERY_GRACE_MS = 60_000;

export const encodeRecord = (record: AuditRecord) => JSON.stringify({ ...record, at: record.at.toISOString() });
export const decodeRecord = (text: string): AuditRecord => {
  const json = JSON.parse(text) as Omit<AuditRecord, "at"> & { at: string };
  return { ...json, at: new Date(json.at) };
};

/**
 * The audit trail of conditional writes on Cassandra (decision 0034), one module for every store that makes one. A
 * lightweight transaction cannot share a logged batch with the audit_events rows, so:
 *
 * 1. `audit_pending` gets the event first (announce);
 * 2. the conditional write carries the event in its own row (the outbox map, or the ledger journal's credit entry);
 * 3. once it applied, the event is copied into audit_events and the pending row deleted in one logged batch; once it
 *    did not apply, the pending row is deleted (settle).
 *
 * A crash (or an outage) between 2 and 3 leaves the pending row: `recover` (run before every audit listing) copies its
 * event when the target holds it, and drops it when not (the write never applied). So an event is never lost, and never
 * shown for a change that did not apply.
 */
export class AuditOutbox {
  constructor(private readonly client: CassandraClient, private readonly now: () => number = Date.now) {}

  /**
   * Runs a conditional write with its event (none when `record` is undefined): `write` gets the outbox entry to set in
   * the same statement (undefined for a ledger target, whose operation carries the record) and answers whether it applied.
   */
  async conditional(record: AuditRecord | undefined, target: OutboxTarget, write: (entry: OutboxEntry | undefined) => Promise<boolean>): Promise<boolean> {
    if (!record) return write(undefined);
    await this.announce(record, target);
    // A throw (an outage, an unknown outcome) leaves the pending row to recovery.
    const applied = await write("ledger" in target ? undefined : { set: "audit_outbox = audit_outbox + ?", param: { [record.eventId]: encodeRecord(record) } });
    await this.settle(record, target, applied);
    return applied;
  }

  /** Step 1: the pending row, before the conditional write. */
  async announce(record: AuditRecord, target: OutboxTarget): Promise<void> {
    await this.client.execute(
      "INSERT INTO audit_pending (bucket, event_id, created_at, record, target) VALUES (?, ?, ?, ?, ?)",
      [PENDING, record.eventId, new Date(this.now()), encodeRecord(record), JSON.stringify(target)], { prepare: true },
    );
  }

  /** Step 3: copied out and the pending row deleted together when applied; the pending row deleted when not. */
  async settle(record: AuditRecord, target: OutboxTarget, applied: boolean): Promise<void> {
    const drop = { query: "DELETE FROM audit_pending WHERE bucket = ? AND event_id = ?", params: [PENDING, record.eventId] };
    if (!applied) {
      await this.client.execute(drop.query, drop.params, { prepare: true });
      return;
    }
    await this.client.loggedBatch([...auditWrites(record), drop]);
    // The outbox keeps only events not copied yet (best effort: an entry left is copied again, to the same rows).
    if (!("ledger" in target)) {
      await this.client.execute(`UPDATE ${target.table} SET audit_outbox = audit_outbox - ? WHERE ${target.column} = ?`, [[record.eventId], target.key], { prepare: true });
    }
  }

  /**
   * Resolves what crashed writers left (pending rows older than RECOVERY_GRACE_MS): each event is copied when its
   * target holds it (read serially, which completes a conditional write in flight), dropped when not. How many were copied.
   */
  async recover(): Promise<number> {
    const rows = (await this.client.execute("SELECT event_id, created_at, record, target FROM audit_pending WHERE bucket = ?", [PENDING], { prepare: true })).rows;
    let copied = 0;
    for (const row of rows) {
      if ((row.created_at as Date).getTime() > this.now() - RECOVERY_GRACE_MS) continue;
      const record = decodeRecord(row.record as string);
      const target = JSON.parse(row.target as string) as OutboxTarget;
      const applied = await this.holds(target, record.eventId);
      await this.settle(record, target, applied);
      if (applied) copied++;
    }
    return copied;
  }

  /**
   * Whether the target holds the event. A ledger journal holds only its last round's: an older round's events were
   * copied out with its journal before the next round replaced it (LedgerStatement.copy), so "not in the journal" is
   * either copied already or never applied, and dropping the pending row loses nothing.
   */
  private async holds(target: OutboxTarget, eventId: string): Promise<boolean> {
    const options = { prepare: true, consistency: this.client.serial };
    if ("ledger" in target) {
      const row = (await this.client.execute("SELECT journal FROM account_ledger WHERE account_id = ? AND hold_id = ''", [target.ledger], options)).first();
      const journal = row?.journal ? (JSON.parse(row.journal as string) as { entries: { audit?: string }[] }) : undefined;
      return journal?.entries.some((entry) => entry.audit !== undefined && decodeRecord(entry.audit).eventId === eventId) ?? false;
    }
    const row = (await this.client.execute(`SELECT audit_outbox FROM ${target.table} WHERE ${target.column} = ?`, [target.key], options)).first();
    return (row?.audit_outbox as Record<string, string> | null | undefined)?.[eventId] !== undefined;
  }
}
