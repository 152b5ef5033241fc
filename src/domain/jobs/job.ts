import type { Money } from "../money.js";
import type { JsonObject } from "../validation/generation-request.js";
import type { ModelPrices } from "../pricing/price-table.js";

export type JobStatus = "queued" | "processing" | "done" | "failed" | "canceled";
export type JobKind = "image" | "text" | "video" | "multimodal_realtime";

/** What the worker needs to run a job, stored with it (no secrets, no bytes). */
export interface JobInput {
  readonly prompt: string;
  readonly aspectRatio?: string;
  readonly resolution?: string;
  readonly durationSeconds?: number;
  readonly inputImageUrls: readonly string[];
  /** Blob keys of the inline images ingested at acceptance. */
  readonly inputBlobKeys: readonly string[];
  readonly maxOutputTokens?: number;
  /** Prices at acceptance: a text job settles at the prices it was accepted under. */
  readonly prices?: ModelPrices;
  /** The upstream route assigned at acceptance (tried first). */
  readonly route?: string;
}

export interface JobResult {
  readonly blobKey?: string;
  readonly mimeType?: string;
  readonly text?: string;
}

export interface JobUsage {
  readonly promptTokens: number;
  readonly textOutputTokens: number;
  readonly videoOutputTokens: number;
}

export interface Job {
  readonly id: string;
  readonly accountId: string;
  readonly model: string;
  readonly kind: JobKind;
  readonly status: JobStatus;
  readonly input: JobInput;
  readonly createdAt: Date;
  readonly startedAt?: Date;
  readonly finishedAt?: Date;
  readonly timeoutSeconds: number;
  readonly reservationId: string;
  readonly reserved: Money;
  readonly charged: Money;
  readonly result?: JobResult;
  readonly error?: string;
  readonly errorMessage?: string;
  readonly usage?: JobUsage;
  readonly callbackUrl?: string;
  readonly metadata?: JsonObject;
  /**
   * Set once a finished job's money has moved. Until then the job is shown as
   * processing, so a client that sees `done` always sees the settled balance.
   */
  readonly settled?: boolean;
  /** The worker that holds the job while processing, and until when (renewed by heartbeats). */
  readonly leaseOwner?: string;
  readonly leaseExpiresAt?: Date;
}
