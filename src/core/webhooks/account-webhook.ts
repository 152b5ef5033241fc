import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { WebhookDeliveryState } from "../../../gen/generation/v1/webhook_pb.js";
import { badRequest, DomainError, invalid } from "../../domain/errors/domain-error.js";
import { isTerminal } from "../../domain/jobs/job-state-machine.js";
import { isHttpUrl } from "../../domain/validation/urls.js";
import { checkTextLength, MAX_URL_CHARACTERS } from "../../domain/validation/text-fields.js";
import type { DeliveryRecord } from "../../ports/delivery-log.js";
import type { WebhookEndpoint } from "../../ports/settings-store.js";
import type { CoreDeps } from "../core-deps.js";
import type { Audit } from "../audit/audit-trail.js";
import { jobWebhookBody, newWebhookSecret, postSigned, succeeded, testEventBody, testMessageId } from "./webhook-requests.js";

/**
 * An account's webhook as its owner and the operator manage it: the URL, the
 * signing secret, a test event, the deliveries and a redelivery. Sending goes
 * through the same signing and transport (address policy included) as the
 * dispatcher's deliveries, and every attempt lands in the same delivery log.
 */
export type WebhookDeps = Pick<CoreDeps, "settings" | "deliveries" | "jobs" | "webhookTransport" | "settingsOf" | "clock" | "telemetry">;

/** How many deliveries a listing shows at most. */
export const MAX_DELIVERIES = 100;

export async function accountWebhook(deps: WebhookDeps, accountId: string): Promise<WebhookEndpoint> {
  const endpoint = await deps.settings.webhook(accountId);
  if (endpoint) return endpoint;
  // An account opened before secrets were made at opening gets one now.
  const made = { url: "", secret: newWebhookSecret() };
  await deps.settings.setWebhook(accountId, made);
  return made;
}

/** Sets (or, with "", clears) the URL; the secret stays. 422 invalid_url unless http(s). */
export async function setWebhookUrl(deps: WebhookDeps, accountId: string, url: string, audit?: Audit): Promise<WebhookEndpoint> {
  checkTextLength("url", url, MAX_URL_CHARACTERS);
  if (url !== "" && !isHttpUrl(url)) throw invalid("invalid_url", "url must be an http:// or https:// URL", { field: "url" });
  const current = await accountWebhook(deps, accountId);
  const endpoint = { url, secret: current.secret };
  await deps.settings.setWebhook(accountId, endpoint, audit?.("webhook.set", { accountId, before: { url: current.url }, after: { url } }));
  return endpoint;
}

/** A new signing secret, used from the next request on (deliveries already signed keep theirs). */
export async function rotateWebhookSecret(deps: WebhookDeps, accountId: string, audit?: Audit): Promise<WebhookEndpoint> {
  const endpoint = { url: (await accountWebhook(deps, accountId)).url, secret: newWebhookSecret() };
  // The secret is never recorded: only that it changed.
  await deps.settings.setWebhook(accountId, endpoint, audit?.("webhook.secret_rotated", { accountId, after: { secret: "changed" } }));
  return endpoint;
}

/** Sends one test event to the account's URL now (no retries) and records it among the deliveries. */
export async function sendTestEvent(deps: WebhookDeps, accountId: string): Promise<DeliveryRecord> {
  const endpoint = await accountWebhook(deps, accountId);
  if (endpoint.url === "") throw invalid("webhook_url_not_set", "the account has no webhook URL: set one first", { field: "url" });
  const messageId = testMessageId();
  const now = deps.clock.now();
  const attempt = await postSigned(deps, endpoint.url, endpoint.secret, messageId, testEventBody(accountId, now), now);
  await deps.deliveries.recordAttempt(messageId, { jobId: "", accountId }, attempt);
  await deps.deliveries.finish(messageId, succeeded(attempt) ? "delivered" : "exhausted");
  return (await deps.deliveries.get(messageId))!;
}

/**
 * Sends a delivery of the account again, now, with the same message id
 * (`webhook-id`), so a receiver that did process it can tell. A job's delivery carries the
 * job's current answer, to the job's callback URL if it had one, else the
 * account's; it becomes delivered (and leaves the dead letters) once a
 * receiver takes it. 404 webhook_delivery_not_found for another account's.
 */
export async function redeliver(deps: WebhookDeps, messageId: string, accountId?: string): Promise<DeliveryRecord> {
  const record = await deps.deliveries.get(messageId);
  if (!record || (accountId !== undefined && record.accountId !== accountId)) {
    throw new DomainError("not_found", "webhook_delivery_not_found", `no webhook delivery ${messageId}`);
  }
  const endpoint = await accountWebhook(deps, record.accountId);
  const now = deps.clock.now();
  let url = endpoint.url;
  let body = testEventBody(record.accountId, now);
  if (record.jobId !== "") {
    const job = await deps.jobs.get(record.jobId);
    if (!job || !isTerminal(job.status)) throw new DomainError("not_found", "webhook_delivery_not_found", `the job of ${messageId} is gone`);
    url = job.callbackUrl ?? endpoint.url;
    body = jobWebhookBody(deps, job, now);
  }
  if (url === "") throw invalid("webhook_url_not_set", "the account has no webhook URL: set one first", { field: "url" });
  const attempt = await postSigned(deps, url, endpoint.secret, messageId, body, now);
  await deps.deliveries.recordAttempt(messageId, { jobId: record.jobId, accountId: record.accountId }, attempt);
  if (succeeded(attempt)) await deps.deliveries.redelivered(messageId);
  return (await deps.deliveries.get(messageId))!;
}

const STATE = { pending: WebhookDeliveryState.PENDING, delivered: WebhookDeliveryState.DELIVERED, exhausted: WebhookDeliveryState.EXHAUSTED } as const;

/** A delivery as the RPCs answer it. */
export function deliveryMessage(record: DeliveryRecord) {
  return {
    messageId: record.messageId, jobId: record.jobId, accountId: record.accountId, state: STATE[record.state],
    attempts: record.attempts.map((attempt) => ({
      time: timestampFromDate(attempt.at), url: attempt.url, statusCode: attempt.status ?? 0, error: attempt.error ?? "",
    })),
  };
}

/** A listing's size: 1 to MAX_DELIVERIES, 20 when unset (400 invalid_limit otherwise). */
export function deliveryLimit(limit: number | undefined): number {
  if (limit === undefined) return 20;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_DELIVERIES) {
    throw badRequest("invalid_limit", `limit must be between 1 and ${MAX_DELIVERIES}`, { field: "limit" });
  }
  return limit;
}
