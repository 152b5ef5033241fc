import { formatMoney } from "../../domain/money.js";
import type { BalanceAlert, BalanceAlertOutbox } from "../../ports/balance-alerts.js";
import { TOPICS, type EventBus } from "../../ports/event-bus.js";
import type { Logger } from "../../ports/logger.js";

/** A balance.low event on its way to the webhook dispatcher (bus JSON: amounts as decimal strings). */
export interface BalanceLowDue {
  /** The alert's id: the delivery's message id (webhook-id). */
  readonly alertId: string;
  readonly accountId: string;
  readonly available: string;
  readonly threshold: string;
  /** RFC 3339: when the movement crossed the threshold. */
  readonly at: string;
}

export const balanceLowDue = (alert: BalanceAlert): BalanceLowDue => ({
  alertId: alert.alertId, accountId: alert.accountId, available: formatMoney(alert.available), threshold: formatMoney(alert.threshold),
  at: alert.at.toISOString(),
});

/** The signed body of a balance.low delivery (decision 0038). */
export function balanceLowBody(alert: BalanceLowDue): string {
  return JSON.stringify({
    type: "balance.low",
    data: { account_id: alert.accountId, available: alert.available, threshold: alert.threshold, at: alert.at },
  });
}

/** How often the webhooks role looks for alerts the ledger wrote. */
export const BALANCE_ALERT_POLL_MS = 250;
const BATCH = 100;

/**
 * Hands the ledger's balance.low outbox to the webhook dispatcher: each alert
 * becomes the first attempt of a delivery on the bus (retries, delivery log
 * and dead letters as for job events), then leaves the outbox. A crash between
 * the two hands it over again: the dispatcher's delivery log, keyed by the
 * alert id, makes that the same delivery, sent once.
 */
export function createBalanceAlertRelay(deps: { readonly balanceAlerts?: BalanceAlertOutbox; readonly bus: EventBus; readonly logger: Logger }) {
  const outbox = deps.balanceAlerts;
  let timer: NodeJS.Timeout | undefined;
  let passing = false;
  async function pass(): Promise<number> {
    if (!outbox) return 0;
    const alerts = await outbox.pendingBalanceAlerts(BATCH);
    for (const alert of alerts) {
      await deps.bus.publish(TOPICS.webhookDelivery, alert.accountId, { jobId: "", alert: balanceLowDue(alert), attempt: 0 });
      await outbox.removeBalanceAlert(alert.alertId);
    }
    return alerts.length;
  }
  return {
    pass,
    start(): void {
      if (!outbox || timer) return;
      timer = setInterval(() => {
        if (passing) return;
        passing = true;
        pass()
          .catch((error: unknown) => deps.logger.warn({ err: error }, "handing balance.low alerts to the webhook dispatcher failed; the next pass retries"))
          .finally(() => (passing = false));
      }, BALANCE_ALERT_POLL_MS);
      timer.unref();
    },
    stop(): void {
      clearInterval(timer);
      timer = undefined;
    },
  };
}
