import type { SessionRole } from "../../domain/accounts/panel-session.js";
import type { PanelSessionRecord, PanelSessionStore } from "../../ports/panel-session-store.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";
import type { AuditRecord } from "../../ports/audit-log.js";
import { SqliteAuditLog } from "./sqlite-audit-log.js";

interface SessionRow {
  session_id: string;
  role: string;
  account_id: string;
  credential_id: string;
  credential_fingerprint: string;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
}

const COLUMNS = "session_id, role, account_id, credential_id, credential_fingerprint, created_at, expires_at, revoked_at";

/** Panel sessions in the embedded file; creating one deletes the expired ones (indexed by expiry: sign-ins are rare). */
export class SqlitePanelSessionStore implements PanelSessionStore {
  private readonly statements;
  /** A change and its audit record in one IMMEDIATE transaction; the record only when the change applied (true). */
  private readonly audited: (change: () => boolean, audit: AuditRecord | undefined) => boolean;

  constructor(db: SqliteDb, audit = new SqliteAuditLog(db)) {
    const tx = db.transaction((change: () => boolean, record: AuditRecord | undefined) => {
      const applied = change();
      if (applied) audit.append(record);
      return applied;
    });
    this.audited = (change, record) => sqliteCall(() => tx.immediate(change, record));
    this.statements = {
      sweep: db.prepare("DELETE FROM panel_sessions WHERE expires_at <= ?"),
      insert: db.prepare(`INSERT OR REPLACE INTO panel_sessions (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
      get: db.prepare(`SELECT ${COLUMNS} FROM panel_sessions WHERE session_id = ?`),
      revoke: db.prepare("UPDATE panel_sessions SET revoked_at = COALESCE(revoked_at, ?) WHERE session_id = ? AND expires_at > ?"),
      isOpen: db.prepare("SELECT 1 FROM panel_sessions WHERE session_id = ? AND revoked_at IS NULL AND expires_at > ?").pluck(),
      revokeByCredential: db.prepare(
        "UPDATE panel_sessions SET revoked_at = ? WHERE credential_id = ? AND revoked_at IS NULL AND expires_at > ?",
      ),
      listOpen: db.prepare(
        `SELECT ${COLUMNS} FROM panel_sessions WHERE revoked_at IS NULL AND expires_at > ? ORDER BY created_at DESC, session_id LIMIT ?`,
      ),
    };
  }

  async create(record: PanelSessionRecord, audit?: AuditRecord): Promise<void> {
    this.audited(() => {
      this.statements.sweep.run(record.createdAt.getTime());
      this.statements.insert.run(
        record.sessionId, record.role, record.accountId, record.credentialId, record.credentialFingerprint,
        record.createdAt.getTime(), record.expiresAt.getTime(), record.revokedAt?.getTime() ?? null,
      );
      return true;
    }, audit);
  }

  async get(sessionId: string): Promise<PanelSessionRecord | undefined> {
    return toRecord(sqliteCall(() => this.statements.get.get(sessionId)) as SessionRow | undefined);
  }

  async revoke(sessionId: string, at: Date, audit?: AuditRecord): Promise<boolean> {
    let found = false;
    // The record only when this call ends the session (an ended one keeps its first end and is recorded once).
    this.audited(() => {
      const open = this.statements.isOpen.get(sessionId, at.getTime()) !== undefined;
      found = this.statements.revoke.run(at.getTime(), sessionId, at.getTime()).changes > 0;
      return open;
    }, audit);
    return found;
  }

  async revokeByCredential(credentialId: string, at: Date): Promise<number> {
    return sqliteCall(() => this.statements.revokeByCredential.run(at.getTime(), credentialId, at.getTime())).changes;
  }

  async listOpen(now: Date, limit: number): Promise<PanelSessionRecord[]> {
    return (sqliteCall(() => this.statements.listOpen.all(now.getTime(), limit)) as SessionRow[]).map((row) => toRecord(row)!);
  }
}

function toRecord(row: SessionRow | undefined): PanelSessionRecord | undefined {
  if (!row) return undefined;
  return {
    sessionId: row.session_id,
    role: row.role as SessionRole,
    accountId: row.account_id,
    credentialId: row.credential_id,
    credentialFingerprint: row.credential_fingerprint,
    createdAt: new Date(row.created_at),
    expiresAt: new Date(row.expires_at),
    ...(row.revoked_at === null ? {} : { revokedAt: new Date(row.revoked_at) }),
  };
}
