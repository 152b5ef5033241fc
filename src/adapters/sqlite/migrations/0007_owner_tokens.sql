-- Schema version 7: owner tokens and key listing (issue 11, the web panel).
-- api_keys.role: "key", an API key; "owner", an owner token (manages the
-- account's keys and webhook, signs in to the panel, calls no model).
-- api_keys_by_account: an account's credentials, oldest first (the panel's key list).
ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'key' CHECK (role IN ('key', 'owner'));
CREATE INDEX api_keys_by_account ON api_keys (account_id, created_at, key_id);
