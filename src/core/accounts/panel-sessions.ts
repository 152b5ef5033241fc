import { randomBytes } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { SessionRole } from "../../../gen/generation/v1/account_service_pb.js";
import { PanelSessionRole } from "../../../gen/generation/v1/admin_service_pb.js";
import {
  credentialFingerprint, csrfTokenOf, issueSession, readSession, sameFingerprint, SESSION_LIFETIME_MS, type PresentedSession,
} from "../../domain/accounts/panel-session.js";
import { badRequest, DomainError } from "../../domain/errors/domain-error.js";
import type { ApiKeyStore } from "../../ports/api-key-store.js";
import type { WriteBarrier } from "../../ports/write-barrier.js";
import type { PanelSessionRecord } from "../../ports/panel-session-store.js";
import { presentsAdminToken } from "../auth/admin-auth.js";
import { ownerOfSession, ownerOfToken, presentedSession, SESSION_HEADER, type SessionAuthDeps } from "../auth/owner-auth.js";
import { presentedKey } from "../auth/presented-key.js";
import type { Audit } from "../audit/audit-trail.js";

/** The Audit of a call by the actor a session names ("admin" for the operator's, "owner:<account_id>" for an owner's). */
export type AuditBy = (actor: string) => Audit;
const actorOf = (session: { readonly role: string; readonly accountId: string }) => (session.role === "owner" ? `owner:${session.accountId}` : "admin");
const sessionAccount = (accountId: string) => (accountId === "" ? undefined : accountId);

/**
 * The web panel's sessions: started and ended by whoever holds one (an
 * owner or the operator, AccountService), listed and ended by the operator
 * (AdminService). A session is valid only while its record is open.
 */
export interface PanelSessionDeps extends SessionAuthDeps {
  readonly apiKeys: ApiKeyStore;
  readonly durability: WriteBarrier;
}

/** The operator's session listing: its default and largest page. */
const DEFAULT_SESSION_LISTING = 100;
const MAX_SESSION_LISTING = 1_000;

function sessionAnswer(secret: Buffer, session: PresentedSession, token: string) {
  return {
    session: token,
    csrfToken: csrfTokenOf(secret, token),
    expireTime: timestampFromDate(session.expiresAt),
    role: session.role === "owner" ? SessionRole.OWNER : SessionRole.OPERATOR,
    accountId: session.accountId,
  };
}

/** A session for the owner token or admin token the headers carry; a session presented instead is answered as it is. */
export async function startSession(deps: PanelSessionDeps, headers: Headers, auditBy?: AuditBy) {
  const secret = deps.settingsOf.urlSigningSecret;
  const now = deps.clock.now();
  const expiresAt = new Date(now.getTime() + SESSION_LIFETIME_MS);
  // A session presented here (without needing its CSRF token) is answered as it is: the panel reads its CSRF token so.
  const current = await presentedSession(headers, deps, { csrf: false });
  if (current) {
    if (current.role === "owner") await ownerOfSession(current, deps.apiKeys);
    return sessionAnswer(secret, current, headers.get(SESSION_HEADER)!);
  }
  const adminToken = deps.settingsOf.adminToken;
  const operator = presentsAdminToken(headers, adminToken);
  const owner = operator ? undefined : await ownerOfToken(headers, deps.apiKeys);
  const session: PresentedSession = {
    id: randomBytes(12).toString("base64url"),
    role: owner ? "owner" : "operator",
    accountId: owner?.accountId ?? "",
    credentialId: owner?.credentialId ?? "",
    expiresAt,
  };
  // The record is the session: what sign-out, the operator and a revoked owner token end.
  await deps.panelSessions.create({
    sessionId: session.id,
    role: session.role,
    accountId: session.accountId,
    credentialId: session.credentialId,
    credentialFingerprint: credentialFingerprint(secret, operator ? adminToken : presentedKey(headers)!),
    createdAt: now,
    expiresAt,
  }, auditBy?.(actorOf(session))("session.started", {
    accountId: sessionAccount(session.accountId), subject: session.id, after: { role: session.role, expires_at: expiresAt.toISOString() },
  }));
  await deps.durability.flush();
  return sessionAnswer(secret, session, issueSession(secret, session, session.id));
}

/** Ends the session the headers carry (sign-out). */
export async function endSession(deps: PanelSessionDeps, headers: Headers, auditBy?: AuditBy): Promise<void> {
  const token = headers.get(SESSION_HEADER);
  if (token === null) throw new DomainError("unauthenticated", "missing_credential", "EndSession needs the session in x-panel-session");
  // Signed by us is enough: ending a session needs no CSRF token and harms only its holder; an expired one has nothing left to end.
  let session: PresentedSession;
  try {
    session = readSession(deps.settingsOf.urlSigningSecret, token, deps.clock.now());
  } catch (error) {
    if (error instanceof DomainError && error.reason === "session_expired") return;
    throw error;
  }
  await endRecorded(deps, session.id, auditBy && ((record) => auditBy(actorOf(record))));
  await deps.durability.flush();
}

/** The open sessions, as the operator lists them. */
export async function listOpenSessions(deps: SessionAuthDeps, limit = DEFAULT_SESSION_LISTING) {
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_SESSION_LISTING) {
    throw badRequest("invalid_limit", `limit must be between 1 and ${MAX_SESSION_LISTING}`, { field: "limit" });
  }
  const now = deps.clock.now();
  const operatorFingerprint = credentialFingerprint(deps.settingsOf.urlSigningSecret, deps.settingsOf.adminToken);
  const open = await deps.panelSessions.listOpen(now, limit);
  return open
    // An operator session of another admin token is ended already (checkOpen refuses it).
    .filter((session) => session.role === "owner" || sameFingerprint(session.credentialFingerprint, operatorFingerprint))
    .map((session) => ({
      sessionId: session.sessionId,
      role: session.role === "owner" ? PanelSessionRole.OWNER : PanelSessionRole.OPERATOR,
      accountId: session.accountId,
      credentialId: session.credentialId,
      createTime: timestampFromDate(session.createdAt),
      expireTime: timestampFromDate(session.expiresAt),
    }));
}

/** Ends an open session (the operator's); an unknown or ended one is panel_session_not_found. */
export async function revokeOpenSession(deps: Pick<SessionAuthDeps, "panelSessions" | "clock">, sessionId: string, audit?: Audit): Promise<void> {
  if (sessionId === "" || !(await endRecorded(deps, sessionId, audit && (() => audit)))) {
    throw new DomainError("not_found", "panel_session_not_found", `no open panel session ${sessionId}`);
  }
}

/** Ends a session; the audit trail records it (session.ended) when it was open, not when it had ended already. */
async function endRecorded(
  deps: Pick<SessionAuthDeps, "panelSessions" | "clock">, sessionId: string, auditFor?: (record: PanelSessionRecord) => Audit,
): Promise<boolean> {
  const now = deps.clock.now();
  const record = await deps.panelSessions.get(sessionId);
  const open = record && !record.revokedAt && record.expiresAt > now;
  const entry = open && auditFor?.(record)("session.ended", {
    accountId: sessionAccount(record.accountId), subject: sessionId, before: { open: true }, after: { open: false },
  });
  return deps.panelSessions.revoke(sessionId, now, entry || undefined);
}
