import type { AuditRecord } from "../../ports/audit-log.js";
import type { PanelSessionRecord, PanelSessionStore } from "../../ports/panel-session-store.js";
import { MemoryAuditLog } from "./memory-audit-log.js";

/** Panel sessions in a map; expired ones are dropped whenever a session is created. */
export class MemoryPanelSessionStore implements PanelSessionStore {
  private readonly sessions = new Map<string, PanelSessionRecord>();

  constructor(private readonly audit = new MemoryAuditLog()) {}

  async create(record: PanelSessionRecord, audit?: AuditRecord): Promise<void> {
    const now = record.createdAt.getTime();
    for (const [id, session] of this.sessions) if (session.expiresAt.getTime() <= now) this.sessions.delete(id);
    this.sessions.set(record.sessionId, record);
    this.audit.append(audit);
  }

  async get(sessionId: string): Promise<PanelSessionRecord | undefined> {
    return this.sessions.get(sessionId);
  }

  async revoke(sessionId: string, at: Date, audit?: AuditRecord): Promise<boolean> {
    const record = this.sessions.get(sessionId);
    if (!record || record.expiresAt.getTime() <= at.getTime()) return false;
    if (!record.revokedAt) {
      this.sessions.set(sessionId, { ...record, revokedAt: at });
      this.audit.append(audit);
    }
    return true;
  }

  async revokeByCredential(credentialId: string, at: Date): Promise<number> {
    let ended = 0;
    for (const record of this.sessions.values()) {
      if (record.credentialId !== credentialId || record.revokedAt || record.expiresAt.getTime() <= at.getTime()) continue;
      this.sessions.set(record.sessionId, { ...record, revokedAt: at });
      ended++;
    }
    return ended;
  }

  async listOpen(now: Date, limit: number): Promise<PanelSessionRecord[]> {
    return [...this.sessions.values()]
      .filter((record) => !record.revokedAt && record.expiresAt.getTime() > now.getTime())
      .sort(newestFirst)
      .slice(0, limit);
  }
}

/** Newest first; the id breaks ties so every adapter lists the same order. */
export const newestFirst = (a: PanelSessionRecord, b: PanelSessionRecord): number =>
  b.createdAt.getTime() - a.createdAt.getTime() || a.sessionId.localeCompare(b.sessionId);
