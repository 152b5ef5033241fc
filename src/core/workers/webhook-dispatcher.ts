import { isTerminal } from "../../domain/jobs/job-state-machine.js";
import type { Job } from "../../domain/jobs/job.js";
import { webhookMessageId } from "../../domain/webhooks/payload.js";
import { TOPICS } from "../../ports/event-bus.js";
import type { CoreDeps } from "../core-deps.js";
import { jobWebhookBody, postSigned, succeeded } from "../webhooks/webhook-requests.js";
import type { JobFinished } from "../jobs/finish-job.js";

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
  readonly jobId: string;
  /** 0 for the first attempt. */
  readonly attempt: number;
}

/**
 * Delivers the job-completion webhook (spec section 6), signed per Standard
 * Webhooks. A 2xx ends delivery for good; anything else is retried on the
 * configured schedule through the bus (so no partition or loop is blocked
 * while waiting), and the last failure marks the delivery exhausted.
 */
export function createWebhookDispatcher(deps: CoreDeps) {
  const settings = deps.settingsOf;
  /** Attempts of one message run one after another in this process (the log's CAS covers other processes). */
  const inFlight = new Map<string, Promise<void>>();

  async function attempt(event: WebhookAttemptDue): Promise<void> {
    const job = await deps.jobs.get(event.jobId);
    if (!job || !isTerminal(job.status) || !job.settled) return;
    const endpoint = await deps.settings.webhook(job.accountId);
    const url = job.callbackUrl ?? (endpoint?.url || undefined);
    if (!url || !endpoint) return;
    const messageId = webhookMessageId(job);
    const previous = inFlight.get(messageId);
    const attributes = { "job.id": job.id, "webhook.attempt": event.attempt + 1 };
    const current = (previous ?? Promise.resolve())
      .catch(() => {})
      .then(() => deps.tracer.span("webhook.deliver", attributes, () => send(job, endpoint.secret, url, messageId, event)));
    inFlight.set(messageId, current);
    try {
      await current;
    } finally {
      if (inFlight.get(messageId) === current) inFlight.delete(messageId);
    }
  }

  async function send(job: Job, secret: string, url: string, messageId: string, event: WebhookAttemptDue): Promise<void> {
    const record = await deps.deliveries.get(messageId);
    if (record && record.state !== "pending") return;
    if (record && record.attempts.length > event.attempt) return; // a duplicate of an attempt already made
    const now = deps.clock.now();
    const body = jobWebhookBody(deps, job, now);
    const attempt = await postSigned(deps, url, secret, messageId, body, now);
    const subject = { jobId: job.id, accountId: job.accountId };
    if (succeeded(attempt)) {
      // Final first: if anything below fails and the event comes again, it finds the delivery done.
      await deps.deliveries.finish(messageId, "delivered");
      deps.telemetry.observe({ kind: "webhook_delivered", seconds: Math.max(0, (now.getTime() - (job.finishedAt ?? now).getTime()) / 1000) });
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
        TOPICS.webhookDelivery, job.id, { jobId: job.id, attempt: event.attempt + 1 }, { delayMs: delay },
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
        messageId, jobId: job.id, url, payload: body, attempts: final?.attempts.length ?? event.attempt + 1,
        lastStatus: attempt.status, lastError: attempt.error,
      });
    }
  }
  return {
    onJobFinished: (event: JobFinished) => attempt({ jobId: event.jobId, attempt: 0 }),
    onAttemptDue: attempt,
  };
}
