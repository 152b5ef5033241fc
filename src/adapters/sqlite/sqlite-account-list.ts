import type { AccountListPage, AccountListQuery } from "../../ports/ledger.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";

interface ListedRow {
  account_id: string;
  name: string;
  sort_key: string;
  balance: string;
  reserved: string;
  created_at: number;
  open_jobs: number;
}

/** Above every character a key can hold: `prefix + TOP` bounds the keys that start with `prefix`. */
const TOP = "\u{10FFFF}";

/** Each account's open jobs: its open holds that are a job's (holds_by_account narrows to the account's open ones). */
const OPEN_JOBS = "(SELECT COUNT(*) FROM holds h WHERE h.account_id = a.account_id AND h.state = 'held' AND h.job_id IS NOT NULL)";

/**
 * The operator's account list on SQLite: a range of accounts_by_name_key (or of the primary key, for an id prefix),
 * from the cursor on, `limit` rows: an index seek, never a scan of every account.
 */
export function sqliteAccountList(db: SqliteDb) {
  const select = (key: string) =>
    db.prepare(
      `SELECT a.account_id, a.name, ${key} AS sort_key, a.balance, a.reserved, a.created_at, ${OPEN_JOBS} AS open_jobs
         FROM accounts a WHERE ${key} >= @prefix AND ${key} < @upper AND (${key}, a.account_id) > (@after_key, @after_id)
         ORDER BY ${key}, a.account_id LIMIT @limit`,
    );
  const statements = { name: select("a.name_key"), id: select("a.account_id") };
  return (query: AccountListQuery): AccountListPage => {
    const rows = sqliteCall(() =>
      statements[query.by].all({
        prefix: query.prefix, upper: query.prefix + TOP, after_key: query.after?.key ?? "", after_id: query.after?.accountId ?? "",
        limit: query.limit + 1,
      }),
    ) as ListedRow[];
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    return {
      accounts: page.map((row) => ({
        accountId: row.account_id, name: row.name, balance: BigInt(row.balance), reserved: BigInt(row.reserved),
        openJobs: row.open_jobs, createdAt: new Date(row.created_at),
      })),
      ...(rows.length > query.limit && last ? { next: { key: last.sort_key, accountId: last.account_id } } : {}),
    };
  };
}
