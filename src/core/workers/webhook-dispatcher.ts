import { isTerminal } from "../../domain/jobs/job-state-machine.js";
import { balanceLowBody, type BalanceLowDue } from "../webhooks/balance-alerts.js";
import { webhookMessageId } from "../../domain/webhooks/payload.js";
import { TOPICS } from "../../ports/event-bus.js";
import type { CoreDeps } from "../core-deps.js";
import { jobWebhookBody, postSigned, succeeded } from "../webhooks/webhook-requests.js";
import type { DeliveryAttempt } from "../../ports/delivery-log.js";
import type { JobFinished } from "../jobs/finish-job.js";
import { DeliveryGate, destinationOf, type DeliveryGateSettings } from "../webhooks/delivery-gate.js";

/** The gate's limits, from configuration (the probe's bound is the webhook timeout's). */
export type WebhookFairness = Omit<DeliveryGateSettings, "probeMs">;

/** What lands on the dead-letter topic when a delivery exhausts its retries. */
export interface WebhookDeadLetter {
  readonly messageId: string;
  readonly jobId: string;
  readonly url: string;
  readonly payload: string;
  readonly attempts: number;
  readonly lastStatus?: number;
  readonly lastError?: string;
}

export interface WebhookAttemptDue {
  /** The job whose completion is delivered; "" for an account event (`alert`). */
  readonly jobId: string;
  /** A balance.low event (decision 0038) instead of a job's completion. */
  readonly alert?: BalanceLowDue;
  /** 0 for the first attempt. */
  readonly attempt: number;
  /** Set when the delivery gate handed this attempt back to wait (a busy or failing destination): the attempt is still to be made. */
  readonly deferred?: boolean;
  /** Set on the check a handed-off attempt leaves behind: usually that attempt is recorded by then and this is a no-op. */
  readonly check?: boolean;
}

/** One delivery's subject: a finished job, or an account event; what `send` needs of it. */
interface Delivery {
  /** The bus key of its attempts. */
  readonly key: string;
  readonly jobId: string;
  readonly accountId: string;
  readonly url: string;
  readonly secret: string;
  readonly messageId: string;
  /** When the event happened (the delivery latency's start). */
  readonly since: Date;
  body(now: Date): string;
  /** The event of a later attempt of this delivery. */
  due(fields: { attempt: number; deferred?: boolean; check?: boolean }): WebhookAttemptDue;
}

/** How long a handler waits for its request before handing it off: most answers come sooner, and the bus's slot is freed for others. */
const HOLD_MS = 1000;
/** A handed-off attempt's check comes this long after the request's own bound, so it finds the attempt recorded unless its process died. */
const CHECK_MARGIN_MS = 5000;
/** When a handed-off attempt's check is due (a bus delay the Kafka bus should have a tier for). */
export const webhookCheckDelayMs = (webhookTimeoutMs: number) => webhookTimeoutMs + CHECK_MARGIN_MS;
/** What an attempt to a destination whose breaker is open records (public: the account sees its deliveries' attempts). */
const BREAKER_OPEN = "not sent: the destination failed to answer repeatedly and is paused (circuit breaker open)";

/**
 * Delivers the job-completion webhook (spec section 6), signed per Standard
 * Webhooks. A 2xx ends delivery for good; anything else is retried on the
 * configured schedule through the bus (so no partition or loop is blocked
 * while waiting), and the last failure marks the delivery exhausted.
 *
 * Fairness (issue 34): every request passes the delivery gate (per-destination
 * and per-account limits, a breaker per destination). An attempt refused for a
 * busy lane goes back to the bus with the gate's delay, unsent and not counted.
 * An attempt to a destination whose breaker is open is made without a request:
 * it fails at once and follows the retry schedule, so deliveries to a dead
 * destination still end as dead letters, and cost neither sockets nor bus churn.
 * A request still running after HOLD_MS is handed off so it does not hold the
 * bus's consumer slot; a check event published then makes the attempt again if
 * this process dies before recording it (an attempt already recorded is skipped).
 */
export function createWebhookDispatcher(deps: CoreDeps, fairness: WebhookFairness) {
  const settings = deps.settingsOf;
  const gate = new DeliveryGate({ ...fairness, probeMs: webhookCheckDelayMs(settings.webhookTimeoutMs) });
  /** Attempts of one message run one after another in this process (the log's CAS covers other processes). */
  const inFlight = new Map<string, Promise<void>>();
  /** Requests handed off by their handler, awaited by stop(). */
  const handedOff = new Set<Promise<void>>();

  async function attempt(event: WebhookAttemptDue): Promise<void> {
    const delivery = event.alert ? await alertDelivery(deps, event.alert) : await jobDelivery(deps, event.jobId);
    if (!delivery) return;
    const { url, messageId } = delivery;
    const endpoint = { secret: delivery.secret };
    const job = { id: delivery.key, accountId: delivery.accountId };
    const previous = inFlight.get(messageId);
    if (event.check && !previous) {
      const record = await deps.deliveries.get(messageId);
      if (record && (record.state !== "pending" || record.attempts.length > event.attempt)) return; // done, or made: the usual case
    }
    const admission = gate.admit(destinationOf(url), job.accountId, deps.clock.now().getTime(), event.deferred === true);
    if (!admission.admitted) {
      deps.telemetry.observe({ kind: "webhook_deferred", reason: admission.reason });
      if (admission.reason === "breaker_open") {
        await previous?.catch(() => {}); // after this process's own attempt of the message, so the log sees one attempt at a time
        return send(delivery, event, async (now) => ({ at: now, url, error: BREAKER_OPEN }));
      }
      await deps.bus.publish<WebhookAttemptDue>(
        TOPICS.webhookDelivery, job.id, delivery.due({ attempt: event.attempt, deferred: true }), { delayMs: admission.delayMs },
      );
      return;
    }
    const { ticket } = admission;
    const post = async (now: Date, body: string) => {
      const started = deps.clock.now().getTime();
      const made = await postSigned(deps, url, endpoint.secret, messageId, body, now);
      const ended = deps.clock.now().getTime();
      ticket.finish(made.status === undefined ? "unanswered" : "answered", ended - started, ended);
      return made;
    };
    const attributes = { "job.id": delivery.jobId, "webhook.attempt": event.attempt + 1 };
    const current = (previous ?? Promise.resolve())
      .catch(() => {})
      .then(() => deps.tracer.span("webhook.deliver", attributes, () => send(delivery, event, post)))
      .finally(() => ticket.finish("none", 0, deps.clock.now().getTime())); // a no-op unless send ended without a request
    inFlight.set(messageId, current);
    const settled = current.finally(() => {
      if (inFlight.get(messageId) === current) inFlight.delete(messageId);
    });
    if (await within(settled, HOLD_MS)) return settled;
    // Still waiting for its answer: free the bus's slot, and leave a check behind in case this process dies first.
    await deps.bus.publish<WebhookAttemptDue>(
      TOPICS.webhookDelivery, job.id, delivery.due({ attempt: event.attempt, check: true }), { delayMs: webhookCheckDelayMs(settings.webhookTimeoutMs) },
    );
    const background = settled.catch((error: unknown) =>
      deps.logger.warn({ job_id: job.id, account_id: job.accountId, message_id: messageId, err: error }, "a handed-off webhook attempt failed; its check event makes it again"),
    );
    handedOff.add(background);
    void background.finally(() => handedOff.delete(background));
  }

  async function send(delivery: Delivery, event: WebhookAttemptDue, post: (now: Date, body: string) => Promise<DeliveryAttempt>): Promise<void> {
    const { url, messageId } = delivery;
    const job = { id: delivery.key, accountId: delivery.accountId };
    const record = await deps.deliveries.get(messageId);
    if (record && record.state !== "pending") return;
    if (record && record.attempts.length > event.attempt) return; // a duplicate of an attempt already made
    const now = deps.clock.now();
    const body = delivery.body(now);
    const attempt = await post(now, body);
    const subject = { jobId: delivery.jobId, accountId: delivery.accountId };
    if (succeeded(attempt)) {
      // Final first: if anything below fails and the event comes again, it finds the delivery done.
      await deps.deliveries.finish(messageId, "delivered");
      deps.telemetry.observe({ kind: "webhook_delivered", seconds: Math.max(0, (now.getTime() - delivery.since.getTime()) / 1000) });
      await deps.deliveries.recordAttempt(messageId, subject, attempt).catch((error) =>
        deps.logger.warn({ job_id: job.id, account_id: job.accountId, message_id: messageId, err: error }, "recording a delivered webhook failed"),
      );
      return;
    }
    const delay = settings.webhookRetryScheduleMs[event.attempt];
    if (delay !== undefined) {
      // The retry is scheduled before this attempt is recorded: if scheduling fails, the event comes
      // again and this (failed) attempt is simply made again, instead of the delivery stalling.
      await deps.bus.publish<WebhookAttemptDue>(
        TOPICS.webhookDelivery, job.id, delivery.due({ attempt: event.attempt + 1 }), { delayMs: delay },
      );
      await deps.deliveries.recordAttempt(messageId, subject, attempt);
      return;
    }
    await deps.deliveries.recordAttempt(messageId, subject, attempt);
    if (await deps.deliveries.finish(messageId, "exhausted")) {
      deps.telemetry.observe({ kind: "webhook_exhausted" });
      deps.logger.warn({ job_id: job.id, account_id: job.accountId, message_id: messageId, attempts: event.attempt + 1 }, "webhook delivery exhausted its retries: a dead letter");
      const final = await deps.deliveries.get(messageId);
      await deps.bus.publish<WebhookDeadLetter>(TOPICS.webhookDeadLetter, job.id, {
        messageId, jobId: delivery.jobId, url, payload: body, attempts: final?.attempts.length ?? event.attempt + 1,
        lastStatus: attempt.status, lastError: attempt.error,
      });
    }
  }
  return {
    onJobFinished: (event: JobFinished) => attempt({ jobId: event.jobId, attempt: 0 }),
    onAttemptDue: attempt,
    /** Waits for handed-off requests (each bounded by the webhook timeout), at most `graceMs`; their check events cover the rest. */
    async stop(graceMs: number): Promise<void> {
      await within(Promise.allSettled([...handedOff]), graceMs);
    },
  };
}

/** A finished, settled job's delivery, to its callback URL or the account's webhook. */
async function jobDelivery(deps: CoreDeps, jobId: string): Promise<Delivery | undefined> {
  const job = await deps.jobs.get(jobId);
  if (!job || !isTerminal(job.status) || !job.settled) return undefined;
  const endpoint = await deps.settings.webhook(job.accountId);
  const url = job.callbackUrl ?? (endpoint?.url || undefined);
  if (!url || !endpoint) return undefined;
  return {
    key: job.id, jobId: job.id, accountId: job.accountId, url, secret: endpoint.secret, messageId: webhookMessageId(job),
    since: job.finishedAt ?? deps.clock.now(), body: (now) => jobWebhookBody(deps, job, now), due: (fields) => ({ jobId: job.id, ...fields }),
  };
}

/** A balance.low event's delivery, to the account's webhook (none set: nothing to deliver). */
async function alertDelivery(deps: CoreDeps, alert: BalanceLowDue): Promise<Delivery | undefined> {
  const endpoint = await deps.settings.webhook(alert.accountId);
  if (!endpoint || endpoint.url === "") return undefined;
  return {
    key: alert.accountId, jobId: "", accountId: alert.accountId, url: endpoint.url, secret: endpoint.secret, messageId: alert.alertId,
    since: new Date(alert.at), body: () => balanceLowBody(alert), due: (fields) => ({ jobId: "", alert, ...fields }),
  };
}

/** True when the promise settled within ms (its failure is the caller's to read). */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, ms))));
  try {
    return await Promise.race([promise.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
