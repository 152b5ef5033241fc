-- Schema version 12: panel sessions kept server-side (issue 34), so sign-out,
-- the operator and a changed credential end them before their expiry.
-- panel_sessions: one row per sign-in, keyed by the session's id (its token's
-- nonce; the token itself is never stored). role 'operator' has account_id
-- and credential_id ''. credential_fingerprint: a MAC of the credential that
-- issued it (the operator's is compared with the current ADMIN_TOKEN's).
-- revoked_at: when it was ended (NULL while open). Rows are deleted once
-- expired, when a later session is created.
CREATE TABLE panel_sessions (
  session_id             TEXT PRIMARY KEY NOT NULL,
  role                   TEXT NOT NULL CHECK (role IN ('owner', 'operator')),
  account_id             TEXT NOT NULL,
  credential_id          TEXT NOT NULL,
  credential_fingerprint TEXT NOT NULL,
  created_at             INTEGER NOT NULL,
  expires_at             INTEGER NOT NULL,
  revoked_at             INTEGER
);
CREATE INDEX panel_sessions_by_credential ON panel_sessions (credential_id) WHERE revoked_at IS NULL;
CREATE INDEX panel_sessions_by_expiry ON panel_sessions (expires_at);
