import type { SessionRole } from "../../domain/accounts/panel-session.js";
import type { PanelSessionRecord, PanelSessionStore } from "../../ports/panel-session-store.js";
import { newestFirst } from "../memory/memory-panel-session-store.js";
import type { CassandraClient, Row } from "./cassandra-session.js";
import type { AuditRecord } from "../../ports/audit-log.js";
import { auditWrites } from "./cassandra-audit-log.js";

type Params = Parameters<CassandraClient["loggedBatch"]>[0][number]["params"];

const LISTED = "all";
const COLUMNS = "session_id, role, account_id, credential_id, credential_fingerprint, created_at, expires_at, revoked_at";
/** How many entries of the listing's index are read before sorting (sign-ins are a few people's). */
const INDEX_READ = 5_000;

/** Seconds a row of the session still has to live (at least one: a TTL of 0 would keep it forever). */
const ttlOf = (record: PanelSessionRecord, now: number) => Math.max(1, Math.ceil((record.expiresAt.getTime() - now) / 1000));

/** Panel sessions on Cassandra: every row carries the TTL of the session's remaining life (migration 0013). */
export class CassandraPanelSessionStore implements PanelSessionStore {
  constructor(private readonly client: CassandraClient) {}

  async create(record: PanelSessionRecord, audit?: AuditRecord): Promise<void> {
    // Cassandra's TTL runs on the wall clock: the session's remaining life from now.
    const ttl = ttlOf(record, Date.now());
    await this.write(record, ttl, audit);
    const indexes = [{ query: "INSERT INTO panel_sessions_listed (bucket, session_id) VALUES (?, ?) USING TTL ?", params: [LISTED, record.sessionId, ttl] }];
    if (record.credentialId !== "") {
      indexes.push({
        query: "INSERT INTO panel_sessions_by_credential (credential_id, session_id) VALUES (?, ?) USING TTL ?",
        params: [record.credentialId, record.sessionId, ttl],
      });
    }
    await this.client.batch(indexes);
  }

  async get(sessionId: string): Promise<PanelSessionRecord | undefined> {
    return toRecord((await this.client.execute(`SELECT ${COLUMNS} FROM panel_sessions WHERE session_id = ?`, [sessionId])).first());
  }

  async revoke(sessionId: string, at: Date, audit?: AuditRecord): Promise<boolean> {
    const record = await this.get(sessionId);
    if (!record || record.expiresAt.getTime() <= at.getTime()) return false;
    // The whole row again, with the TTL it has left: an UPDATE of an expired row would bring back a row without its fields.
    if (!record.revokedAt) await this.write({ ...record, revokedAt: at }, ttlOf(record, at.getTime()), audit);
    return true;
  }

  async revokeByCredential(credentialId: string, at: Date): Promise<number> {
    const rows = (await this.client.execute("SELECT session_id FROM panel_sessions_by_credential WHERE credential_id = ?", [credentialId])).rows;
    let ended = 0;
    for (const row of rows) {
      const record = await this.get(row.session_id as string);
      if (!record || record.revokedAt || record.credentialId !== credentialId) continue;
      if (await this.revoke(record.sessionId, at)) ended++;
    }
    return ended;
  }

  async listOpen(now: Date, limit: number): Promise<PanelSessionRecord[]> {
    const ids = (await this.client.execute("SELECT session_id FROM panel_sessions_listed WHERE bucket = ? LIMIT ?", [LISTED, INDEX_READ])).rows;
    const records = await Promise.all(ids.map((row) => this.get(row.session_id as string)));
    return records
      .filter((record): record is PanelSessionRecord => record !== undefined && !record.revokedAt && record.expiresAt.getTime() > now.getTime())
      .sort(newestFirst)
      .slice(0, limit);
  }

  /** The session's row and its audit event (when given): one logged batch, both or neither. */
  private async write(record: PanelSessionRecord, ttl: number, audit?: AuditRecord): Promise<void> {
    // An open session leaves revoked_at out: a null would write a tombstone per sign-in.
    const values = [record.sessionId, record.role, record.accountId, record.credentialId, record.credentialFingerprint, record.createdAt, record.expiresAt];
    const columns = record.revokedAt ? COLUMNS : COLUMNS.replace(", revoked_at", "");
    const params = record.revokedAt ? [...values, record.revokedAt] : values;
    const query = `INSERT INTO panel_sessions (${columns}) VALUES (${params.map(() => "?").join(", ")}) USING TTL ?`;
    if (!audit) return void (await this.client.execute(query, [...params, ttl]));
    await this.client.loggedBatch([{ query, params: [...params, ttl] }, ...auditWrites(audit)].map((w) => ({ query: w.query, params: w.params as Params })));
  }
}

function toRecord(row: Row | undefined | null): PanelSessionRecord | undefined {
  // A row whose fields expired (or a partial one) is no session.
  if (!row || (row.role !== "owner" && row.role !== "operator") || !row.expires_at) return undefined;
  return {
    sessionId: row.session_id as string,
    role: row.role as SessionRole,
    accountId: (row.account_id as string | null) ?? "",
    credentialId: (row.credential_id as string | null) ?? "",
    credentialFingerprint: (row.credential_fingerprint as string | null) ?? "",
    createdAt: row.created_at as Date,
    expiresAt: row.expires_at as Date,
    ...(row.revoked_at ? { revokedAt: row.revoked_at as Date } : {}),
  };
}
