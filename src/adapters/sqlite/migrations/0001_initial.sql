-- Schema of the embedded (SQLite) store, version 1.
--
-- Money is picodollars (src/domain/money.ts) kept as TEXT decimal strings
-- ("-12", "10000000000000"): exact at any size, never a float, never an
-- integer that could overflow 64 bits. Times are INTEGER milliseconds since
-- the epoch unless a column says otherwise. Tables are not STRICT so that an
-- operator's older sqlite3 shell can still open a backup.
--
-- Every money or state step runs in one transaction (BEGIN IMMEDIATE), the
-- SQLite counterpart of the Cassandra adapters' lightweight transactions.

-- accounts: balance and reserved change together with the hold or ledger
-- row that explains them.
CREATE TABLE accounts (
  account_id TEXT PRIMARY KEY NOT NULL,
  name       TEXT NOT NULL,
  balance    TEXT NOT NULL,
  reserved   TEXT NOT NULL,
  created_at INTEGER NOT NULL
);

-- holds: one row per reservation, never deleted. state moves once, from
-- 'held' to 'settled' (charged = what was charged) or 'released'.
CREATE TABLE holds (
  reservation_id TEXT PRIMARY KEY NOT NULL,
  account_id     TEXT NOT NULL REFERENCES accounts (account_id),
  amount         TEXT NOT NULL,
  state          TEXT NOT NULL CHECK (state IN ('held', 'settled', 'released')),
  charged        TEXT,
  created_at     INTEGER NOT NULL,
  ended_at       INTEGER
);
CREATE INDEX holds_by_account ON holds (account_id, state);

-- ledger_entries: every movement of an account's balance, never deleted.
-- kind 'opening' (initial balance), 'credit', 'charge' (a settled hold;
-- amount is what left the balance, reservation_id says which hold).
CREATE TABLE ledger_entries (
  entry_id       INTEGER PRIMARY KEY AUTOINCREMENT,
  account_id     TEXT NOT NULL REFERENCES accounts (account_id),
  kind           TEXT NOT NULL CHECK (kind IN ('opening', 'credit', 'charge')),
  amount         TEXT NOT NULL,
  balance_after  TEXT NOT NULL,
  reservation_id TEXT,
  at             INTEGER NOT NULL
);
CREATE INDEX ledger_entries_by_account ON ledger_entries (account_id, entry_id);

-- jobs: status and lease are columns (the compare-and-set conditions), the
-- rest is the JSON body of src/adapters/shared/job-codec.ts. finished_at
-- drives retention.
CREATE TABLE jobs (
  job_id           TEXT PRIMARY KEY NOT NULL,
  account_id       TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'done', 'failed')),
  lease_owner      TEXT,
  lease_expires_at INTEGER,
  finished_at      INTEGER,
  body             TEXT NOT NULL
);
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE status IN ('done', 'failed');

-- job_fences: ids whose acceptance died before storing its job; a job with
-- such an id can never be created.
CREATE TABLE job_fences (
  job_id    TEXT PRIMARY KEY NOT NULL,
  fenced_at INTEGER NOT NULL
);

-- unfinished_jobs: from before a job's price is reserved until its money and
-- completion event are done; the reaper's work list, paged by job_id.
CREATE TABLE unfinished_jobs (
  job_id     TEXT PRIMARY KEY NOT NULL,
  account_id TEXT NOT NULL,
  since      INTEGER NOT NULL
);

-- idempotency_keys: claimed by the unique (scope, key); a row whose
-- expires_at has passed is treated as absent and removed by purgeExpired.
-- pending and response are JSON StoredResponse; response is NULL until the
-- request completed. token is the current owner.
CREATE TABLE idempotency_keys (
  scope       TEXT NOT NULL,
  key         TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  token       TEXT NOT NULL,
  pending     TEXT NOT NULL,
  response    TEXT,
  claimed_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- api_keys: looked up by secret_hash on every request, revoked by key_id.
-- models is a JSON array.
CREATE TABLE api_keys (
  key_id      TEXT PRIMARY KEY NOT NULL,
  secret_hash TEXT NOT NULL UNIQUE,
  account_id  TEXT NOT NULL,
  models      TEXT NOT NULL,
  revoked     INTEGER NOT NULL DEFAULT 0,
  created_at  INTEGER NOT NULL
);

-- Operator settings. A model or route is paused while its row exists.
CREATE TABLE project_settings (
  name  TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
);
CREATE TABLE model_pauses (
  model TEXT PRIMARY KEY NOT NULL
);
CREATE TABLE route_pauses (
  route TEXT PRIMARY KEY NOT NULL
);
-- prices: JSON in the decimal-string form (formatModelPrices); seeded with
-- INSERT OR IGNORE, so what an admin changed survives restarts.
CREATE TABLE prices (
  model  TEXT PRIMARY KEY NOT NULL,
  prices TEXT NOT NULL
);
CREATE TABLE webhooks (
  account_id TEXT PRIMARY KEY NOT NULL,
  url        TEXT NOT NULL,
  secret     TEXT NOT NULL
);

-- webhook_deliveries: 'delivered' and 'exhausted' are final, set only from
-- 'pending'. attempts is a JSON array of DeliveryAttempt (at as ISO text).
CREATE TABLE webhook_deliveries (
  message_id TEXT PRIMARY KEY NOT NULL,
  job_id     TEXT NOT NULL,
  state      TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'exhausted')),
  attempts   TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX webhook_deliveries_by_job ON webhook_deliveries (job_id);

-- The durable in-process event bus. bus_groups: every consumer group ever
-- subscribed to a topic (a publish writes one bus_events row per group, even
-- while the group is not subscribed in this run). bus_events: undelivered
-- events; deleted when a handler succeeds, due_at moved when it fails.
CREATE TABLE bus_groups (
  topic         TEXT NOT NULL,
  group_name    TEXT NOT NULL,
  registered_at INTEGER NOT NULL,
  PRIMARY KEY (topic, group_name)
);
CREATE TABLE bus_events (
  event_id     INTEGER PRIMARY KEY AUTOINCREMENT,
  topic        TEXT NOT NULL,
  group_name   TEXT NOT NULL,
  event_key    TEXT NOT NULL,
  payload      TEXT NOT NULL,
  due_at       INTEGER NOT NULL,
  attempts     INTEGER NOT NULL DEFAULT 0,
  published_at INTEGER NOT NULL
);
CREATE INDEX bus_events_by_group ON bus_events (topic, group_name, due_at);
