-- Schema version 16: the audit trail (issue 39). One row per change to money,
-- permissions, prices, pauses, routes or webhooks, written in the change's own
-- transaction; never updated nor deleted (the triggers refuse both). Values are
-- JSON text without secrets. Listed newest first, by time or by account.
CREATE TABLE audit_events (
  event_id       TEXT PRIMARY KEY NOT NULL,
  at_ms          INTEGER NOT NULL,
  kind           TEXT NOT NULL,
  actor          TEXT NOT NULL,
  client_address TEXT NOT NULL,
  account_id     TEXT,
  subject        TEXT,
  before_value   TEXT,
  after_value    TEXT
);
CREATE INDEX audit_events_by_time ON audit_events (at_ms DESC, event_id DESC);
CREATE INDEX audit_events_by_account ON audit_events (account_id, at_ms DESC, event_id DESC);
CREATE TRIGGER audit_events_never_updated BEFORE UPDATE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;
CREATE TRIGGER audit_events_never_deleted BEFORE DELETE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;
