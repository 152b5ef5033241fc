import { accountNameKey } from "../../domain/accounts/account-listing.js";
import { isLowBalance } from "../../domain/accounts/low-balance.js";
import type { BalanceAlert } from "../../ports/balance-alerts.js";
import type { AccountChange, AccountDetails } from "../../ports/ledger.js";
import type { SqliteDb } from "./sqlite-database.js";

interface DetailsRow {
  name: string;
  balance: string;
  reserved: string;
  created_at: number;
  open_jobs: number;
  low_balance_threshold: string | null;
  low_balance: number;
}

interface AlertRow {
  alert_id: string;
  account_id: string;
  available: string;
  threshold: string;
  at: number;
}

/**
 * One account's page and settings on SQLite (decision 0038): its name (and the name key the listing searches,
 * changed in the same statement), its low-balance threshold and state, and the outbox of balance.low events the
 * ledger's transactions write (migrations/0017).
 */
export function sqliteAccountSettings(db: SqliteDb) {
  const s = {
    details: db.prepare(
      `SELECT a.name, a.balance, a.reserved, a.created_at, a.low_balance_threshold, a.low_balance,
         (SELECT COUNT(*) FROM holds h WHERE h.account_id = a.account_id AND h.state = 'held' AND h.job_id IS NOT NULL) AS open_jobs
       FROM accounts a WHERE a.account_id = ?`,
    ),
    rename: db.prepare("UPDATE accounts SET name = ?, name_key = ? WHERE account_id = ?"),
    threshold: db.prepare("UPDATE accounts SET low_balance_threshold = ?, low_balance = ? WHERE account_id = ?"),
    alerts: db.prepare("SELECT alert_id, account_id, available, threshold, at FROM balance_alerts ORDER BY at, alert_id LIMIT ?"),
    removeAlert: db.prepare("DELETE FROM balance_alerts WHERE alert_id = ?"),
  };
  const account = (accountId: string): AccountDetails | undefined => {
    const row = s.details.get(accountId) as DetailsRow | undefined;
    if (!row) return undefined;
    return {
      accountId, name: row.name, balance: BigInt(row.balance), reserved: BigInt(row.reserved), createdAt: new Date(row.created_at),
      openJobs: row.open_jobs, lowBalance: row.low_balance === 1,
      ...(row.low_balance_threshold !== null && { lowBalanceThreshold: BigInt(row.low_balance_threshold) }),
    };
  };
  const update = db.transaction((accountId: string, change: AccountChange): AccountDetails | undefined => {
    const before = account(accountId);
    if (!before) return undefined;
    if (change.name !== undefined) s.rename.run(change.name, accountNameKey(change.name), accountId);
    if (change.lowBalanceThreshold !== undefined) {
      const threshold = change.lowBalanceThreshold ?? undefined;
      // Judged on the new threshold without an event: a setting is not a movement.
      s.threshold.run(threshold?.toString() ?? null, isLowBalance(before.balance - before.reserved, threshold) ? 1 : 0, accountId);
    }
    return account(accountId);
  });
  return {
    account,
    update,
    pendingAlerts: (limit: number): BalanceAlert[] =>
      (s.alerts.all(limit) as AlertRow[]).map((row) => ({
        alertId: row.alert_id, accountId: row.account_id, available: BigInt(row.available), threshold: BigInt(row.threshold), at: new Date(row.at),
      })),
    removeAlert: (alertId: string) => void s.removeAlert.run(alertId),
  };
}
