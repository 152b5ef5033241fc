-- Schema version 3: listing an account's jobs (GET /api/v1/jobs), newest first.
--
-- created_at (milliseconds since the epoch) and model are copied out of the
-- JSON body into columns, set once at creation (neither ever changes), so the
-- listing is one range scan of jobs_by_account: the account's jobs in
-- (created_at, job_id) descending order, continued strictly below a page's
-- last job. Status and model filters are checked on the rows of that scan.
-- Jobs stored before this version get both from their body.
ALTER TABLE jobs ADD COLUMN created_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN model TEXT NOT NULL DEFAULT '';
UPDATE jobs SET
  created_at = CAST(ROUND((julianday(json_extract(body, '$.createdAt')) - 2440587.5) * 86400000) AS INTEGER),
  model = json_extract(body, '$.model');
CREATE INDEX jobs_by_account ON jobs (account_id, created_at DESC, job_id DESC);
