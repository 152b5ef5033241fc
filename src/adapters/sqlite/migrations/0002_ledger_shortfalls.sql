-- Schema version 2: a balance never goes negative.
--
-- A settlement charges at most its hold plus the available balance; what the
-- upstream's usage cost beyond that is not charged and is recorded here, in
-- the same transaction as the charge, for the operator. One row per
-- settlement that fell short, never deleted.
--   asked     what the usage cost (picodollars, TEXT decimal)
--   charged   what left the balance (also the 'charge' ledger entry)
--   shortfall asked − charged: the amount not charged
CREATE TABLE ledger_shortfalls (
  reservation_id TEXT PRIMARY KEY NOT NULL REFERENCES holds (reservation_id),
  account_id     TEXT NOT NULL REFERENCES accounts (account_id),
  asked          TEXT NOT NULL,
  charged        TEXT NOT NULL,
  shortfall      TEXT NOT NULL,
  at             INTEGER NOT NULL
);
CREATE INDEX ledger_shortfalls_by_account ON ledger_shortfalls (account_id, at);
