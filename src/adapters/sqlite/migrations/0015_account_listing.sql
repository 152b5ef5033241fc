-- Schema version 15: the operator's account list (issue 39), searched by a
-- prefix of the name or of the id. name_key: the name as it is sorted and
-- searched (NFC, lower case: domain/accounts/account-listing.ts, written by
-- the ledger with the account); the accounts before this version get
-- SQLite's lower(name), the same for ASCII names.
ALTER TABLE accounts ADD COLUMN name_key TEXT NOT NULL DEFAULT '';
UPDATE accounts SET name_key = lower(name);
CREATE INDEX accounts_by_name_key ON accounts (name_key, account_id);
