-- Schema version 10: running tallies of open holds, so a reservation never
-- counts an account's or a key's backlog row by row (issue 13: an account
-- with 100k queued jobs reserves as fast as an empty one).
--
-- open_hold_tallies: the number of the account's open holds that a
--   maxOpenHolds option counts (reservation id starting with counted_prefix
--   and not with except_prefix, '' for none). Created, from a count of the
--   holds, by the first reservation that asks; from then on every hold taken
--   or ended in the same transaction moves it.
-- key_hold_tallies: a key's open holds (their sum, and how many are jobs'),
--   created by the first reservation whose key limits need them, then moved
--   with every hold of that key.
CREATE TABLE open_hold_tallies (
  account_id     TEXT NOT NULL,
  counted_prefix TEXT NOT NULL,
  except_prefix  TEXT NOT NULL,
  open           INTEGER NOT NULL,
  PRIMARY KEY (account_id, counted_prefix, except_prefix)
) WITHOUT ROWID;

CREATE TABLE key_hold_tallies (
  key_id     TEXT PRIMARY KEY NOT NULL,
  account_id TEXT NOT NULL,
  held       TEXT NOT NULL,
  open_jobs  INTEGER NOT NULL
) WITHOUT ROWID;
