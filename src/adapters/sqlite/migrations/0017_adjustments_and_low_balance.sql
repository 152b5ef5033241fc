-- Schema version 18: operator adjustments and the low-balance alert (issue 39,
-- decisions 0037 and 0038).
--
-- ledger_entries is rebuilt: its CHECK on kind gains 'adjustment' (SQLite
-- cannot change a CHECK in place, as 0011 did), and `note` carries an
-- adjustment's reason (NULL on other entries).
CREATE TABLE ledger_entries_v18 (
  entry_id          INTEGER PRIMARY KEY,
  account_id        TEXT NOT NULL REFERENCES accounts (account_id),
  kind              TEXT NOT NULL CHECK (kind IN ('credit', 'hold', 'charge', 'release', 'adjustment')),
  amount            TEXT NOT NULL,
  balance_after     TEXT NOT NULL,
  reserved_change   TEXT NOT NULL,
  reserved_after    TEXT NOT NULL,
  reservation_id    TEXT,
  job_id            TEXT,
  model             TEXT,
  key_id            TEXT,
  prompt_tokens     INTEGER,
  candidates_tokens INTEGER,
  at                INTEGER NOT NULL,
  reason            TEXT,
  note              TEXT
);
INSERT INTO ledger_entries_v18 (entry_id, account_id, kind, amount, balance_after, reserved_change, reserved_after,
    reservation_id, job_id, model, key_id, prompt_tokens, candidates_tokens, at, reason)
  SELECT entry_id, account_id, kind, amount, balance_after, reserved_change, reserved_after,
    reservation_id, job_id, model, key_id, prompt_tokens, candidates_tokens, at, reason FROM ledger_entries ORDER BY entry_id;
DROP TABLE ledger_entries;
ALTER TABLE ledger_entries_v18 RENAME TO ledger_entries;
CREATE INDEX ledger_entries_by_account ON ledger_entries (account_id, entry_id);
CREATE INDEX ledger_charges_by_time ON ledger_entries (account_id, at) WHERE kind = 'charge';

-- The low-balance setting and its state, with the balance they are judged on:
-- low_balance_threshold is picodollars as TEXT (NULL: no alert); low_balance is 1
-- while available < threshold was last seen by a movement (the alert is armed
-- again when a movement sees available at or above it).
ALTER TABLE accounts ADD COLUMN low_balance_threshold TEXT;
ALTER TABLE accounts ADD COLUMN low_balance INTEGER NOT NULL DEFAULT 0;

-- The outbox of balance.low events: written in the transaction of the movement
-- that crossed the threshold, deleted once the event is handed to the webhook
-- dispatcher (a crash between the two repeats the handing over, and the
-- delivery's message id, the alert id, keeps it one event).
CREATE TABLE balance_alerts (
  alert_id   TEXT PRIMARY KEY NOT NULL,
  account_id TEXT NOT NULL,
  available  TEXT NOT NULL,
  threshold  TEXT NOT NULL,
  at         INTEGER NOT NULL
);
