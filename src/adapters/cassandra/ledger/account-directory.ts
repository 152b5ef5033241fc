import { accountNameKey } from "../../../domain/accounts/account-listing.js";
import type { AccountDetails, AccountListPage, AccountListQuery, AccountListing } from "../../../ports/ledger.js";
import type { CassandraClient } from "../cassandra-session.js";
import { decodeKeyHolds, MONEY } from "./account-state.js";

/** Above every character a key can hold: `prefix + TOP` bounds the keys that start with `prefix`. */
const TOP = "\u{10FFFF}";

/** The account's rows in both buckets of accounts_listed (migration 0015); idempotent (cassandra-session.ts copies the older accounts alike). */
export async function listAccount(client: CassandraClient, accountId: string, name: string): Promise<void> {
  const insert = "INSERT INTO accounts_listed (bucket, sort_key, account_id) VALUES (?, ?, ?)";
  await client.execute(insert, ["name", accountNameKey(name), accountId]);
  await client.execute(insert, ["id", accountId, accountId]);
}

/**
 * One page of accounts: one slice of one partition of accounts_listed from the cursor (limit + 1 rows), then the
 * money row of each. An index row whose account is missing (its creation failed after the row was written) is skipped.
 */
export async function listAccounts(client: CassandraClient, query: AccountListQuery): Promise<AccountListPage> {
  const after = query.after ?? { key: query.prefix, accountId: "" };
  const keys = (
    await client.execute(
      "SELECT sort_key, account_id FROM accounts_listed WHERE bucket = ? AND (sort_key, account_id) > (?, ?) AND (sort_key) < (?) LIMIT ?",
      [query.by, after.key, after.accountId, query.prefix + TOP, query.limit + 1],
    )
  ).rows;
  const page = keys.slice(0, query.limit);
  const read = await Promise.all(page.map((row) => listing(client, row.account_id as string)));
  // A name row left by a rename (its removal follows the rename and may not have happened) no longer names the account.
  const accounts = read.map((account, i) => (query.by === "name" && account && accountNameKey(account.name) !== page[i]!.sort_key ? undefined : account));
  const last = page.at(-1);
  return {
    accounts: accounts.filter((account): account is AccountListing => account !== undefined),
    ...(keys.length > query.limit && last ? { next: { key: last.sort_key as string, accountId: last.account_id as string } } : {}),
  };
}

/** A rename's index rows: the new name's row first (a listing never misses the account), then the old one's removed. */
export async function relistAccount(client: CassandraClient, accountId: string, oldName: string, newName: string, rename: () => Promise<void>): Promise<void> {
  await client.execute("INSERT INTO accounts_listed (bucket, sort_key, account_id) VALUES (?, ?, ?)", ["name", accountNameKey(newName), accountId]);
  await rename();
  if (accountNameKey(oldName) !== accountNameKey(newName)) {
    await client.execute("DELETE FROM accounts_listed WHERE bucket = ? AND sort_key = ? AND account_id = ?", ["name", accountNameKey(oldName), accountId]);
  }
}

/** One account with its settings (the money row, read once; not serially: a view, as the listing's). */
export async function accountDetails(client: CassandraClient, accountId: string): Promise<AccountDetails | undefined> {
  const row = (
    await client.execute(
      "SELECT name, created_at, balance, reserved, key_holds, low_balance_threshold, low_balance FROM account_ledger WHERE account_id = ? AND hold_id = ?",
      [accountId, MONEY],
    )
  ).first();
  if (!row) return undefined;
  const holds = Object.values((row.key_holds as Record<string, string> | null) ?? {}).map(decodeKeyHolds);
  const threshold = row.low_balance_threshold as bigint | null;
  return {
    accountId, name: (row.name as string | null) ?? "", balance: row.balance as bigint, reserved: row.reserved as bigint,
    createdAt: row.created_at as Date, openJobs: holds.reduce((sum, held) => sum + held.openJobs, 0),
    ...(threshold !== null && { lowBalanceThreshold: threshold }), lowBalance: (row.low_balance as boolean | null) ?? false,
  };
}

const listing = (client: CassandraClient, accountId: string): Promise<AccountListing | undefined> => accountDetails(client, accountId);
