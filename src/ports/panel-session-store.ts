import type { SessionRole } from "../domain/accounts/panel-session.js";
import type { AuditRecord } from "./audit-log.js";

/** A panel session as the core keeps it: never its token (only its id, the token's nonce). */
export interface PanelSessionRecord {
  readonly sessionId: string;
  readonly role: SessionRole;
  /** The owner's account; "" for the operator. */
  readonly accountId: string;
  /** The owner token it came from; "" for the operator. */
  readonly credentialId: string;
  /** credentialFingerprint of the credential that issued it (the operator's: the admin token). */
  readonly credentialFingerprint: string;
  readonly createdAt: Date;
  readonly expiresAt: Date;
  /** Set once the session was ended (sign-out, the operator, its owner token revoked). */
  readonly revokedAt?: Date;
}

/**
 * The panel's sessions, each kept until it expires: a session whose record
 * is missing or revoked is refused. Sign-ins are few (a person's, twelve
 * hours each), so records are small and short-lived; each adapter forgets
 * expired ones (SQLite and memory when a session is created, Cassandra by TTL).
 */
export interface PanelSessionStore {
  /** `audit`, when given, is written with the change in one atomic step (none when a revoke finds nothing to end). */
  create(record: PanelSessionRecord, audit?: AuditRecord): Promise<void>;
  get(sessionId: string): Promise<PanelSessionRecord | undefined>;
  /** Ends the session at `at`; false when there is no such unexpired record. Ending an ended one keeps its first end. */
  revoke(sessionId: string, at: Date, audit?: AuditRecord): Promise<boolean>;
  /** Ends every unexpired session issued by the credential (an owner token's id); how many were still open. */
  revokeByCredential(credentialId: string, at: Date): Promise<number>;
  /** The sessions not expired at `now` and not revoked, newest first, at most `limit`. */
  listOpen(now: Date, limit: number): Promise<PanelSessionRecord[]>;
}
