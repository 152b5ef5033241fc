import { randomBytes, randomUUID } from "node:crypto";
import { Webhook } from "standardwebhooks";
import type { Job } from "../../domain/jobs/job.js";
import { webhookPayload } from "../../domain/webhooks/payload.js";
import type { DeliveryAttempt } from "../../ports/delivery-log.js";
import type { WebhookResult } from "../../ports/telemetry.js";
import type { WebhookAttemptResult } from "../../ports/webhook-transport.js";
import type { CoreDeps } from "../core-deps.js";
import { signedResultUrl } from "../jobs/result-urls.js";

/** Standard Webhooks symmetric secret: 32 random bytes, base64, "whsec_" prefix. */
export const newWebhookSecret = () => `whsec_${randomBytes(32).toString("base64")}`;

/** The body of a job's webhook, its result link signed afresh. */
export function jobWebhookBody(deps: Pick<CoreDeps, "settingsOf">, job: Job, now: Date): string {
  const imageUrl = job.result?.blobKey ? signedResultUrl(deps.settingsOf, job.result.blobKey, now) : undefined;
  return JSON.stringify(webhookPayload(job, imageUrl));
}

/** A test event: what SendTestWebhook sends, so a receiver can check its URL and its signature check. */
export function testEventBody(accountId: string, now: Date): string {
  return JSON.stringify({ type: "webhook.test", account_id: accountId, created_at: now.toISOString(), message: "A test event from the generation service." });
}

export const testMessageId = () => `msg_test_${randomUUID().replaceAll("-", "")}`;

/** Sends one signed request (Standard Webhooks headers) and says how it went; never throws for the receiver's failures. */
export async function postSigned(
  deps: Pick<CoreDeps, "webhookTransport" | "settingsOf" | "telemetry">, url: string, secret: string, messageId: string, body: string, now: Date,
): Promise<DeliveryAttempt> {
  const headers = {
    "content-type": "application/json",
    "user-agent": "generation-service-webhooks/1",
    "webhook-id": messageId,
    "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
    "webhook-signature": new Webhook(secret).sign(messageId, now, body),
  };
  const started = performance.now();
  const outcome = await deps.webhookTransport.post(url, headers, body, deps.settingsOf.webhookTimeoutMs);
  deps.telemetry.observe({ kind: "webhook_attempt", result: resultOf(outcome), seconds: (performance.now() - started) / 1000 });
  return { at: now, url, ...outcome };
}

/** An attempt's result as the metrics count it: the status class, or why no answer came. */
function resultOf(outcome: WebhookAttemptResult): WebhookResult {
  if (outcome.status !== undefined) return outcome.status >= 500 ? "5xx" : outcome.status >= 400 ? "4xx" : outcome.status >= 300 ? "3xx" : "2xx";
  return /time(d)? ?out/i.test(outcome.error ?? "") ? "timeout" : "network_error";
}

export const succeeded = (attempt: DeliveryAttempt) => attempt.status !== undefined && attempt.status >= 200 && attempt.status <= 299;
