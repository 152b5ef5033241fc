-- Schema version 5: the account statement (GET /api/v1/ledger) and usage
-- reports (GET /api/v1/usage).
--
-- ledger_entries now records every movement of an account's money, in the
-- same transaction as the movement, never changed or deleted:
--   kind             'credit' (an opening balance is a credit), 'hold',
--                    'charge' (a settled hold), 'release'
--   amount           signed change of the balance (picodollars, TEXT
--                    decimal): credits positive, charges negative, holds and
--                    releases '0'. The sum over an account is its balance.
--   balance_after    the balance after this entry
--   reserved_change  signed change of reserved: a hold adds its amount, its
--                    charge or release takes it away. The sum is reserved.
--   reserved_after   reserved after this entry
--   job_id, model, key_id           what the hold was for (holds, charges, releases)
--   prompt_tokens, candidates_tokens the tokens a charge paid for
-- The table is rebuilt (SQLite cannot change a CHECK in place). Rows written
-- before this version: 'opening' becomes 'credit', a charge's amount becomes
-- negative, reserved_change is '0' (their holds were not recorded then), and
-- every hold still open gets its 'hold' entry now, so both sums still hold.
-- holds gains the hold's job, model and key, copied onto its later entries.
ALTER TABLE holds ADD COLUMN job_id TEXT;
ALTER TABLE holds ADD COLUMN model TEXT;
ALTER TABLE holds ADD COLUMN key_id TEXT;

CREATE TABLE ledger_entries_v5 (
  entry_id          INTEGER PRIMARY KEY AUTOINCREMENT,
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
INSERT INTO ledger_entries_v5 (entry_id, account_id, kind, amount, balance_after, reserved_change, reserved_after, reservation_id, at)
  SELECT entry_id, account_id,
         CASE kind WHEN 'opening' THEN 'credit' ELSE kind END,
         CASE WHEN kind = 'charge' AND amount <> '0' THEN '-' || amount ELSE amount END,
         balance_after, '0', '0', reservation_id, at
  FROM ledger_entries ORDER BY entry_id;
INSERT INTO ledger_entries_v5 (account_id, kind, amount, balance_after, reserved_change, reserved_after, reservation_id, at)
  SELECT h.account_id, 'hold', '0', a.balance, h.amount, '0', h.reservation_id, h.created_at
  FROM holds h JOIN accounts a ON a.account_id = h.account_id
  WHERE h.state = 'held' ORDER BY h.created_at, h.reservation_id;
UPDATE ledger_entries_v5 SET reserved_after = CAST(running.reserved AS TEXT)
  FROM (SELECT entry_id, SUM(CAST(reserved_change AS INTEGER)) OVER (PARTITION BY account_id ORDER BY entry_id) AS reserved
        FROM ledger_entries_v5) AS running
  WHERE running.entry_id = ledger_entries_v5.entry_id;
DROP TABLE ledger_entries;
ALTER TABLE ledger_entries_v5 RENAME TO ledger_entries;
CREATE INDEX ledger_entries_by_account ON ledger_entries (account_id, entry_id);
CREATE INDEX ledger_charges_by_time ON ledger_entries (account_id, at) WHERE kind = 'charge';
