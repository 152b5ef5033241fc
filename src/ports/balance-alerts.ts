import type { Money } from "../domain/money.js";

/** A balance.low event due (decision 0038): written by the ledger in the step that crossed the threshold. */
export interface BalanceAlert {
  /** Unique; the webhook delivery's message id, so handing it over twice sends one event. */
  readonly alertId: string;
  readonly accountId: string;
  readonly available: Money;
  readonly threshold: Money;
  readonly at: Date;
}

/**
 * The outbox of balance.low events: the ledger writes an alert in the same
 * atomic step as the movement that crossed the threshold; the webhooks role
 * hands each to the webhook dispatcher, then removes it (at least once; the
 * alert id makes a repeat the same delivery).
 */
export interface BalanceAlertOutbox {
  /** Alerts not yet handed over, oldest first, at most `limit`. */
  pendingBalanceAlerts(limit: number): Promise<BalanceAlert[]>;
  removeBalanceAlert(alertId: string): Promise<void>;
}
