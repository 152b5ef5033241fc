-- Migration 0018: operator credits and adjustments applied once (decision 0039).
--
-- An operator's credit or adjustment sent with an Idempotency-Key carries an
-- operation id derived from the key (its scope, the key and the request's
-- fingerprint). It is kept on the entry the operation makes, and the ledger's
-- transaction looks it up before moving money: an id already on an entry of
-- the account moves nothing again (the unique index makes a second entry
-- impossible even so). NULL on every other entry.
ALTER TABLE ledger_entries ADD COLUMN operation_id TEXT;
CREATE UNIQUE INDEX ledger_entries_by_operation ON ledger_entries (account_id, operation_id) WHERE operation_id IS NOT NULL;
