import type { BalanceAlert } from "../../../ports/balance-alerts.js";
import { serialRead, type CassandraClient } from "../cassandra-session.js";
import { MONEY } from "./account-state.js";

const PENDING = "pending";
/** A pending row younger than this may still have its round in flight: the relay leaves it to its writer. */
export const ALERT_GRACE_MS = 60_000;

/** An alert as the money row's balance_alerts map keeps it (ledger-rules.ts, judgeLowBalance). */
interface StoredAlert {
  readonly available: string;
  readonly threshold: string;
  readonly at: number;
}

/**
 * The balance.low outbox on Cassandra (decision 0038, migrations 0018 and 0019). The round that crosses the threshold
 * adds its alert to the money row's `balance_alerts` map in its own conditional write; so that the relay finds it
 * without reading every account:
 *
 * 1. `announce`: the alert's id goes into `balance_alert_pending` BEFORE the round's conditional write;
 * 2. `pending`: the relay reads that one partition and, for each row, the account's map serially (which completes a
 *    round in flight): an alert the map holds is due; a row whose alert it does not hold and that is older than the
 *    grace period is dropped (its round lost, or the alert was already handed over and removed);
 * 3. `remove`: once handed to the dispatcher, the map entry, then the pending row, are deleted.
 *
 * A crash after the round leaves the pending row and the map entry: the next pass hands it over. A crash after the
 * hand-over hands it over again, and two relays may both hand one over: the same alert id (the delivery's
 * webhook-id), which the dispatcher's delivery log and the receiver dedupe.
 */
export class BalanceAlertIndex {
  constructor(private readonly client: CassandraClient, private readonly now: () => number = Date.now) {}

  async announce(accountId: string, alertIds: readonly string[]): Promise<void> {
    const at = new Date(this.now());
    for (const alertId of alertIds) {
      await this.client.execute(
        "INSERT INTO balance_alert_pending (bucket, alert_id, account_id, created_at) VALUES (?, ?, ?, ?)",
        [PENDING, alertId, accountId, at], { prepare: true },
      );
    }
  }

  async pending(limit: number): Promise<BalanceAlert[]> {
    const rows = (await this.client.execute("SELECT alert_id, account_id, created_at FROM balance_alert_pending WHERE bucket = ?", [PENDING], { prepare: true })).rows;
    const maps = new Map<string, Record<string, string>>();
    const due: BalanceAlert[] = [];
    for (const row of rows) {
      const alertId = row.alert_id as string;
      const accountId = row.account_id as string;
      if (!maps.has(accountId)) {
        const money = await serialRead(this.client, "SELECT balance_alerts FROM account_ledger WHERE account_id = ? AND hold_id = ?", [accountId, MONEY]);
        maps.set(accountId, (money?.balance_alerts as Record<string, string> | null | undefined) ?? {});
      }
      const stored = maps.get(accountId)![alertId];
      if (stored === undefined) {
        if ((row.created_at as Date).getTime() <= this.now() - ALERT_GRACE_MS) await this.drop(alertId);
        continue;
      }
      const alert = JSON.parse(stored) as StoredAlert;
      due.push({ alertId, accountId, available: BigInt(alert.available), threshold: BigInt(alert.threshold), at: new Date(alert.at) });
    }
    return due.sort((a, b) => a.at.getTime() - b.at.getTime() || (a.alertId < b.alertId ? -1 : 1)).slice(0, limit);
  }

  async remove(alertId: string): Promise<void> {
    const row = (await this.client.execute("SELECT account_id FROM balance_alert_pending WHERE bucket = ? AND alert_id = ?", [PENDING, alertId], { prepare: true })).first();
    if (row) {
      // Not conditional: rounds only add to the map (`balance_alerts + ?`), so this entry's cell is never written again.
      await this.client.execute("UPDATE account_ledger SET balance_alerts = balance_alerts - ? WHERE account_id = ? AND hold_id = ?",
        [[alertId], row.account_id as string, MONEY], { prepare: true });
    }
    await this.drop(alertId);
  }

  private async drop(alertId: string): Promise<void> {
    await this.client.execute("DELETE FROM balance_alert_pending WHERE bucket = ? AND alert_id = ?", [PENDING, alertId], { prepare: true });
  }
}
