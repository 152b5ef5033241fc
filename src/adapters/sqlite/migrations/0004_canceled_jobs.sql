-- Schema version 4: jobs may be canceled (POST /api/v1/jobs/{id}/cancel).
--
-- SQLite cannot change a CHECK constraint in place, so the jobs table is
-- rebuilt with 'canceled' among its statuses (same columns, same rows), and
-- its indexes are made again; the retention index covers canceled jobs too.
CREATE TABLE jobs_v4 (
  job_id           TEXT PRIMARY KEY NOT NULL,
  account_id       TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'done', 'failed', 'canceled')),
  lease_owner      TEXT,
  lease_expires_at INTEGER,
  finished_at      INTEGER,
  body             TEXT NOT NULL,
  created_at       INTEGER NOT NULL DEFAULT 0,
  model            TEXT NOT NULL DEFAULT ''
);
INSERT INTO jobs_v4 (job_id, account_id, status, lease_owner, lease_expires_at, finished_at, body, created_at, model)
  SELECT job_id, account_id, status, lease_owner, lease_expires_at, finished_at, body, created_at, model FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v4 RENAME TO jobs;
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE status IN ('done', 'failed', 'canceled');
CREATE INDEX jobs_by_account ON jobs (account_id, created_at DESC, job_id DESC);
