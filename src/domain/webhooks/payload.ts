import type { Job } from "../jobs/job.js";
import type { JsonObject } from "../validation/generation-request.js";

/** The webhook body of spec section 6: a subset of GET job, raw status names. */
export interface WebhookPayload {
  job_id: string;
  /** "canceled" extends the spec: a job canceled by its owner (POST /api/v1/jobs/{id}/cancel). */
  status: "success" | "failed" | "canceled";
  result?: { image_url: string | null; text: string | null };
  error?: string;
  metadata: JsonObject | null;
}

export function webhookPayload(job: Job, imageUrl: string | undefined): WebhookPayload {
  const base = { job_id: job.id, metadata: job.metadata ?? null };
  if (job.status === "done") {
    return { ...base, status: "success", result: { image_url: imageUrl ?? null, text: job.result?.text ?? null } };
  }
  if (job.status === "failed") return { ...base, status: "failed", error: job.error ?? "generation_failed" };
  if (job.status === "canceled") return { ...base, status: "canceled" };
  throw new Error(`job ${job.id} is ${job.status}: only finished jobs have a webhook`);
}

/** Stable across retries so receivers can deduplicate (Standard Webhooks `webhook-id`). */
export function webhookMessageId(job: Job): string {
  return `msg_${job.id}_${job.status}`;
}
