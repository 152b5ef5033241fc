-- Schema version 8: deliveries listed by account and dead letters (issue 11, the web panel).
-- webhook_deliveries.account_id: the account whose webhook it is (older rows
-- get it from their job); last_at: when it was last attempted (ms), the order
-- of both listings. A test event has job_id ''.
ALTER TABLE webhook_deliveries ADD COLUMN account_id TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_deliveries ADD COLUMN last_at INTEGER NOT NULL DEFAULT 0;
UPDATE webhook_deliveries SET account_id = COALESCE((SELECT account_id FROM jobs WHERE jobs.job_id = webhook_deliveries.job_id), '');
UPDATE webhook_deliveries SET last_at = COALESCE(CAST(ROUND((julianday(json_extract(attempts, '$[#-1].at')) - 2440587.5) * 86400000) AS INTEGER), 0);
CREATE INDEX webhook_deliveries_by_account ON webhook_deliveries (account_id, last_at);
CREATE INDEX webhook_dead_letters ON webhook_deliveries (last_at) WHERE state = 'exhausted';
