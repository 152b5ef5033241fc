import { DomainError } from "../../domain/errors/domain-error.js";
import {
  checkCsrfToken, credentialFingerprint, readSession, sameFingerprint, sessionRevoked, type PanelSession, type PresentedSession,
} from "../../domain/accounts/panel-session.js";
import type { ApiKeyStore } from "../../ports/api-key-store.js";
import type { Clock } from "../../ports/clock.js";
import type { PanelSessionStore } from "../../ports/panel-session-store.js";
import { hashSecret, presentedKey } from "./presented-key.js";

/** The panel session (the gateway copies it from its HttpOnly cookie) and the CSRF token every call of it carries. */
export const SESSION_HEADER = "x-panel-session";
export const CSRF_HEADER = "x-csrf-token";

/** An account's owner, signed in with an owner token or a panel session of one. */
export interface Owner {
  readonly accountId: string;
  /** The owner token's id. */
  readonly credentialId: string;
}

const ownerOnly = () =>
  new DomainError("permission_denied", "owner_credential_required", "this call needs the account owner's credential (an owner token or a panel session of one), not an API key");

/** What checking a panel session needs: the signing secret, the session records, and the admin token operator sessions are bound to. */
export interface SessionAuthDeps {
  readonly panelSessions: PanelSessionStore;
  readonly settingsOf: { readonly urlSigningSecret: Buffer; readonly adminToken: string };
  readonly clock: Clock;
}

/**
 * The session the headers carry, checked (signature, expiry, CSRF token, and
 * its record: open, and for the operator issued by the current admin token),
 * or undefined when they carry none. A credential sent explicitly (a key or
 * a token, presentedKey) wins over a session cookie the browser happens to
 * carry: the session is then not looked at. `csrf: false` only where the
 * session's own CSRF token is handed out.
 */
export async function presentedSession(headers: Headers, deps: SessionAuthDeps, { csrf = true } = {}): Promise<PresentedSession | undefined> {
  const token = headers.get(SESSION_HEADER);
  if (token === null || presentedKey(headers) !== undefined) return undefined;
  const secret = deps.settingsOf.urlSigningSecret;
  // Forgeries, expired sessions and missing CSRF tokens are refused before the store is asked.
  const session = readSession(secret, token, deps.clock.now());
  if (csrf) checkCsrfToken(secret, token, headers.get(CSRF_HEADER));
  await checkOpen(deps, session);
  return session;
}

/** 401 session_revoked unless the session's record is open and, for the operator, was issued by the current admin token. */
async function checkOpen(deps: SessionAuthDeps, session: PresentedSession): Promise<void> {
  const record = await deps.panelSessions.get(session.id);
  // No record: ended and forgotten, or signed by this secret before sessions were kept (a copy from before an upgrade).
  if (!record || record.revokedAt || record.role !== session.role || record.accountId !== session.accountId || record.credentialId !== session.credentialId) {
    throw sessionRevoked();
  }
  if (session.role === "operator") {
    const current = credentialFingerprint(deps.settingsOf.urlSigningSecret, deps.settingsOf.adminToken);
    if (!sameFingerprint(record.credentialFingerprint, current)) throw sessionRevoked("the admin token changed since this panel session began; sign in again");
  }
}

/** The owner token the headers present (`authorization: Bearer gso_…`), or 401/403. */
export async function ownerOfToken(headers: Headers, keys: ApiKeyStore): Promise<Owner> {
  const secret = presentedKey(headers);
  if (!secret) throw new DomainError("unauthenticated", "missing_credential", "an owner token or a panel session is required");
  const record = await keys.findBySecretHash(hashSecret(secret));
  if (!record || record.revoked) throw new DomainError("unauthenticated", "invalid_owner_token", "the owner token is invalid or revoked");
  if (record.role !== "owner") throw ownerOnly();
  return { accountId: record.accountId, credentialId: record.keyId };
}

/**
 * The owner behind a call: a panel session of an owner (whose owner token is
 * still valid: revoking it ends its sessions) or an owner token. An API key
 * is 403 owner_credential_required; an operator session is not an owner.
 */
export async function authenticateOwner(headers: Headers, deps: SessionAuthDeps & { readonly apiKeys: ApiKeyStore }): Promise<Owner> {
  const session = await presentedSession(headers, deps);
  return session ? ownerOfSession(session, deps.apiKeys) : ownerOfToken(headers, deps.apiKeys);
}

/** The owner of a checked session, while the owner token it came from is valid. */
export async function ownerOfSession(session: PanelSession, keys: ApiKeyStore): Promise<Owner> {
  if (session.role !== "owner") throw ownerOnly();
  const token = await keys.get(session.credentialId);
  if (!token || token.revoked || token.role !== "owner" || token.accountId !== session.accountId) {
    throw new DomainError("unauthenticated", "session_revoked", "the owner token of this panel session was revoked; sign in again");
  }
  return { accountId: session.accountId, credentialId: session.credentialId };
}
