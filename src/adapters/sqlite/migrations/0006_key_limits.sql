-- Schema version 6: per-key limits (issue 10).
--
-- api_keys.limits: the key's spend and rate limits as JSON (money as decimal
-- strings of picodollars); NULL: none.
-- key_spending: what each key has spent (settled charges: in total, on one
-- UTC day, in one UTC month) and its reservations in the current UTC minute,
-- as JSON; changed in the same transaction as the reservation or settlement
-- that moves it, so a limit is checked atomically with the money.
ALTER TABLE api_keys ADD COLUMN limits TEXT;
CREATE TABLE key_spending (
  key_id     TEXT PRIMARY KEY NOT NULL,
  account_id TEXT NOT NULL REFERENCES accounts (account_id),
  spending   TEXT NOT NULL
);
CREATE INDEX holds_by_key ON holds (key_id, state);
