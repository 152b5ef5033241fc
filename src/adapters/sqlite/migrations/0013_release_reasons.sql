-- Schema version 13: a release entry says why its hold was released (issue
-- 34): job_failed, job_canceled, client_gone, nothing_delivered or abandoned
-- (domain/ledger/release-reasons.ts). NULL on every other entry, and on the
-- releases written before this version (the statement shows no reason).
ALTER TABLE ledger_entries ADD COLUMN reason TEXT;
