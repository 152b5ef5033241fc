import { createHmac, timingSafeEqual } from "node:crypto";
import { DomainError } from "../errors/domain-error.js";

/**
 * Panel sessions: what the web panel's HttpOnly cookie holds once an owner
 * token (or the admin token) was exchanged for it. A session is a signed,
 * self-contained token, so every process of a deployment that shares the
 * signing secret accepts it without a session store:
 *
 *   "gps1." base64url(JSON [role, accountId, credentialId, expiresAtMs, nonce]) "." base64url(MAC)
 *
 * The MAC is HMAC-SHA256 (truncated to 128 bits) under the signing secret
 * with its own purpose label, so no other signed token of the service (page
 * tokens, file links) can pass for a session. The signature only rejects
 * forgeries cheaply: a session is also a record in the core's session store,
 * keyed by its nonce (the session id), which sign-out, the operator and a
 * revoked owner token end; an operator's record holds the fingerprint of the
 * admin token that issued it (credentialFingerprint), so another ADMIN_TOKEN
 * ends every operator session (docs/decisions/0006-panel-sessions.md). The CSRF
 * token is derived from the session (another MAC), so the panel can be given
 * it at any time and a forged request without it, which a browser would send
 * with the cookie, is refused.
 */

export type SessionRole = "owner" | "operator";

export interface PanelSession {
  readonly role: SessionRole;
  /** The owner's account; "" for the operator. */
  readonly accountId: string;
  /** The owner token the session came from; "" for the operator. */
  readonly credentialId: string;
  readonly expiresAt: Date;
}

/** A session read from its token: with its id (the nonce), the key of its record in the session store. */
export interface PresentedSession extends PanelSession {
  readonly id: string;
}

const PREFIX = "gps1";
const MAC_BYTES = 16;
/** How long a session lasts: a working day. Signing in again is cheap; a stolen cookie dies soon. */
export const SESSION_LIFETIME_MS = 12 * 3600_000;

function mac(secret: Buffer, purpose: string, text: string): string {
  return createHmac("sha256", secret).update(`panel-${purpose}\n${text}`).digest().subarray(0, MAC_BYTES).toString("base64url");
}

function equalText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

export function issueSession(secret: Buffer, session: PanelSession, nonce: string): string {
  const payload = Buffer.from(JSON.stringify([session.role, session.accountId, session.credentialId, session.expiresAt.getTime(), nonce])).toString("base64url");
  const body = `${PREFIX}.${payload}`;
  return `${body}.${mac(secret, "session", body)}`;
}

/** The CSRF token of a session: the panel sends it in `x-csrf-token` with every call. */
export function csrfTokenOf(secret: Buffer, sessionToken: string): string {
  return mac(secret, "csrf", sessionToken);
}

const refused = (reason: string, message: string) => new DomainError("unauthenticated", reason, message);

/**
 * The session a token stands for, if it is one of ours and unexpired;
 * otherwise 401 (`invalid_session`, `session_expired`). Every call of a
 * session also needs `checkCsrfToken`; only handing out the session's own
 * CSRF token (StartSession with a session) does without.
 */
export function readSession(secret: Buffer, token: string, now: Date): PresentedSession {
  // The MAC covers the prefix and the payload: anything not made by issueSession with this secret stops here.
  const cut = token.lastIndexOf(".");
  const body = token.slice(0, cut);
  if (!equalText(token.slice(cut + 1), mac(secret, "session", body))) {
    throw refused("invalid_session", "the panel session is not valid; sign in again");
  }
  let fields: unknown;
  try {
    fields = JSON.parse(Buffer.from(body.slice(PREFIX.length + 1), "base64url").toString("utf8"));
  } catch {
    throw refused("invalid_session", "the panel session cannot be read; sign in again");
  }
  if (!isSessionFields(fields)) throw refused("invalid_session", "the panel session has an unknown format; sign in again");
  const [role, accountId, credentialId, expiresAtMs, id] = fields;
  if (expiresAtMs <= now.getTime()) throw refused("session_expired", "the panel session has expired; sign in again");
  return { role, accountId, credentialId, expiresAt: new Date(expiresAtMs), id };
}

/**
 * What a session's record keeps of the credential that issued it: a MAC of
 * it under the signing secret (the credential itself is never stored). The
 * operator's is checked against the current ADMIN_TOKEN on every call.
 */
export function credentialFingerprint(secret: Buffer, credential: string): string {
  return mac(secret, "credential", credential);
}

/** Whether two fingerprints (or any two MACs) are the same, in constant time. */
export const sameFingerprint = (a: string, b: string): boolean => equalText(a, b);

/** 401 `session_revoked`: the session was ended (signed out, revoked, its credential changed) before its expiry. */
export const sessionRevoked = (message = "the panel session was ended; sign in again") => refused("session_revoked", message);

/** 401 `csrf_token_mismatch` unless `csrfToken` is the session's. */
export function checkCsrfToken(secret: Buffer, token: string, csrfToken: string | undefined | null): void {
  if (!csrfToken || !equalText(csrfToken, csrfTokenOf(secret, token))) {
    throw refused("csrf_token_mismatch", "a panel call needs the session's CSRF token in x-csrf-token");
  }
}

function isSessionFields(fields: unknown): fields is [SessionRole, string, string, number, string] {
  if (!Array.isArray(fields) || fields.length !== 5) return false;
  const [role, accountId, credentialId, expiresAtMs, nonce] = fields as unknown[];
  return (role === "owner" || role === "operator") && typeof accountId === "string" && typeof credentialId === "string"
    && Number.isSafeInteger(expiresAtMs) && typeof nonce === "string";
}
