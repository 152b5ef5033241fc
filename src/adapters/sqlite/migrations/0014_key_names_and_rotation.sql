-- Schema version 14: a key has a display name, and a rotation keeps the
-- replaced secret working until a chosen instant (issue 39).
-- previous_secret_hash: the secret the last rotation replaced (one at a time:
-- a new rotation ends the older one); previous_secret_expires_at: when it
-- stops working (ms since the epoch; the core compares it with its clock).
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN previous_secret_hash TEXT;
ALTER TABLE api_keys ADD COLUMN previous_secret_expires_at INTEGER;
CREATE UNIQUE INDEX api_keys_by_previous_secret ON api_keys (previous_secret_hash) WHERE previous_secret_hash IS NOT NULL;
