-- Schema version 11: fewer pages written per hold (issue 13). A text call's
-- reservation wrote 10 pages to the WAL and its settlement 13 (counted from
-- the WAL's frames); a commit's cost is mostly those pages. Three of them
-- bought nothing:
--
-- ledger_entries loses AUTOINCREMENT: every entry rewrote sqlite_sequence.
--   Entries are never deleted, so a plain INTEGER PRIMARY KEY still numbers
--   them in order (the largest id plus one) and never reuses an id; the
--   statement's cursor (entry_id) reads the same.
-- unfinished_jobs becomes WITHOUT ROWID: its row and its key's index were two
--   pages, now one.
-- holds_by_account and holds_by_key index open holds only (state = 'held', the
--   only state their queries read): ending a hold removes its index entries
--   instead of moving them to the ended holds' end of each index.
CREATE TABLE ledger_entries_v11 (
  entry_id          INTEGER PRIMARY KEY,
  account_id        TEXT NOT NULL REFERENCES accounts (account_id),
  kind              TEXT NOT NULL CHECK (kind IN ('credit', 'hold', 'charge', 'release')),
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
  at                INTEGER NOT NULL
);
INSERT INTO ledger_entries_v11 SELECT entry_id, account_id, kind, amount, balance_after, reserved_change, reserved_after,
  reservation_id, job_id, model, key_id, prompt_tokens, candidates_tokens, at FROM ledger_entries ORDER BY entry_id;
DROP TABLE ledger_entries;
ALTER TABLE ledger_entries_v11 RENAME TO ledger_entries;
CREATE INDEX ledger_entries_by_account ON ledger_entries (account_id, entry_id);
CREATE INDEX ledger_charges_by_time ON ledger_entries (account_id, at) WHERE kind = 'charge';

CREATE TABLE unfinished_jobs_v11 (
  job_id     TEXT PRIMARY KEY NOT NULL,
  account_id TEXT NOT NULL,
  since      INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO unfinished_jobs_v11 SELECT job_id, account_id, since FROM unfinished_jobs;
DROP TABLE unfinished_jobs;
ALTER TABLE unfinished_jobs_v11 RENAME TO unfinished_jobs;

DROP INDEX holds_by_account;
DROP INDEX holds_by_key;
CREATE INDEX holds_by_account ON holds (account_id) WHERE state = 'held';
CREATE INDEX holds_by_key ON holds (key_id, account_id) WHERE state = 'held';
