import { Webhook } from "standardwebhooks";
import { isTerminal } from "../../domain/jobs/job-state-machine.js";
import { webhookMessageId, webhookPayload } from "../../domain/webhooks/payload.js";
import { TOPICS } from "../../ports/event-bus.js";
import type { CoreDeps } from "../core-deps.js";
import { signedResultUrl } from "../jobs/result-urls.js";
import type { JobFinished } from "./generation-worker.js";

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
  const sending = new Set<string>();

  async function attempt(event: WebhookAttemptDue): Promise<void> {
    const job = await deps.jobs.get(event.jobId);
    if (!job || !isTerminal(job.status) || !job.settled) return;
    const endpoint = await deps.settings.webhook(job.accountId);
    const url = job.callbackUrl ?? (endpoint?.url || undefined);
    if (!url || !endpoint) return;
    const messageId = webhookMessageId(job);
    // One attempt per message at a time in this process; the log's CAS covers the rest.
    if (sending.has(messageId)) return;
    const record = await deps.deliveries.get(messageId);
    if (record && record.state !== "pending") return;
    if (record && record.attempts.length > event.attempt) return; // a duplicate of an attempt already made
    sending.add(messageId);
    try {
      const now = deps.clock.now();
      const imageUrl = job.result?.blobKey ? signedResultUrl(settings, job.result.blobKey, now) : undefined;
      const body = JSON.stringify(webhookPayload(job, imageUrl));
      const signature = new Webhook(endpoint.secret).sign(messageId, now, body);
      const headers = {
        "content-type": "application/json",
        "user-agent": "generation-service-webhooks/1",
        "webhook-id": messageId,
        "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
        "webhook-signature": signature,
      };
      const outcome = await deps.webhookTransport.post(url, headers, body, settings.webhookTimeoutMs);
      await deps.deliveries.recordAttempt(messageId, job.id, { at: now, url, ...outcome });
      if (outcome.status !== undefined && outcome.status >= 200 && outcome.status <= 299) {
        await deps.deliveries.finish(messageId, "delivered");
        return;
      }
      const delay = settings.webhookRetryScheduleMs[event.attempt];
      if (delay === undefined) {
        if (await deps.deliveries.finish(messageId, "exhausted")) {
          const record = await deps.deliveries.get(messageId);
          await deps.bus.publish<WebhookDeadLetter>(TOPICS.webhookDeadLetter, job.id, {
            messageId, jobId: job.id, url, payload: body, attempts: record?.attempts.length ?? event.attempt + 1,
            lastStatus: outcome.status, lastError: outcome.error,
          });
        }
        return;
      }
      await deps.bus.publish<WebhookAttemptDue>(
        TOPICS.webhookDelivery, job.id, { jobId: job.id, attempt: event.attempt + 1 }, { delayMs: delay },
      );
    } finally {
      sending.delete(messageId);
    }
  }

  return {
    onJobFinished: (event: JobFinished) => attempt({ jobId: event.jobId, attempt: 0 }),
    onAttemptDue: attempt,
  };
}
