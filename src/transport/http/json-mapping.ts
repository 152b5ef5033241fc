import { fromJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { timestampMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import { LRUCache } from "lru-cache";
import { JobStatus, type Job } from "../../../gen/generation/v1/job_pb.js";
import { LedgerEntryTypeSchema, type Balance, type LedgerEntry, type UsageRow } from "../../../gen/generation/v1/money_pb.js";
import { checkMetadata, checkMetadataShape, DomainError, type MetadataLimits } from "../../core/index.js";
import { unsupportedMediaType } from "./error-replies.js";
import { GatewayError } from "./gateway-error.js";

/** Domain rules the gateway applies to the raw JSON before converting it (the core applies them again). */
export interface BodyRules {
  /**
   * Limits of a top-level `metadata` object, checked before it becomes a
   * protobuf Struct. Without them only the rules that need no configuration
   * (a JSON object, at most 32 levels deep) are checked here.
   */
  readonly metadata?: MetadataLimits;
}

/** Whether the message has a top-level `metadata` Struct (the raw JSON's "metadata" becomes it). */
const hasMetadataStruct = (schema: DescMessage) =>
  schema.fields.some((field) => field.localName === "metadata" && field.message?.typeName === "google.protobuf.Struct");

/** The domain's metadata rules on the raw JSON, refused in the gateway's terms (422 and the domain's reason). */
function checkRawMetadata(metadata: unknown, rules: BodyRules): void {
  try {
    if (rules.metadata) checkMetadata(metadata, rules.metadata);
    else checkMetadataShape(metadata);
  } catch (error) {
    if (error instanceof DomainError) throw new GatewayError(422, error.reason, error.message);
    throw error;
  }
}

/**
 * JSON bodies are the proto JSON mapping of the request messages: proto
 * field names and lowerCamelCase both accepted, unknown fields ignored (as
 * the vendor does). A field of the wrong type is a 422. With `rules`, the
 * domain's own checks run first on the raw JSON, so a million metadata keys
 * or a deeply nested object are refused (422) before any conversion.
 */
export function parseBody<S extends DescMessage>(schema: S, body: unknown, rules: BodyRules = {}): MessageShape<S> {
  if (typeof body === "string") {
    // Fastify parses text/plain into a string: the body was not sent as JSON.
    throw unsupportedMediaType();
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new GatewayError(422, "validation_failed", "the request body must be a JSON object");
  }
  if (hasMetadataStruct(schema)) checkRawMetadata((body as { metadata?: unknown }).metadata, rules);
  try {
    return fromJson(schema, body as JsonValue, { ignoreUnknownFields: true });
  } catch (error) {
    const message = (error as Error).message.replace(/^cannot decode (message|field) [\w.]+ from JSON: /, "");
    throw new GatewayError(422, "validation_failed", `invalid field: ${message}`);
  }
}

const STATUS_NAMES: Record<JobStatus, string> = {
  [JobStatus.UNSPECIFIED]: "unknown",
  [JobStatus.QUEUED]: "queued",
  [JobStatus.PROCESSING]: "processing",
  [JobStatus.DONE]: "done",
  [JobStatus.FAILED]: "failed",
  [JobStatus.CANCELED]: "canceled",
};

export const jobStatusName = (status: JobStatus) => STATUS_NAMES[status];

/** ISO strings of the instants formatted lately: a polled job's times are formatted once, not on every GET. */
const isoByMs = new LRUCache<number, string>({ max: 4_096 });

function iso(timestamp: Timestamp | undefined): string | null {
  if (!timestamp) return null;
  const ms = timestampMs(timestamp);
  let text = isoByMs.get(ms);
  if (text === undefined) isoByMs.set(ms, (text = new Date(ms).toISOString()));
  return text;
}

/** GET /api/v1/jobs/{id} (spec 2.4): every documented field present, null where the spec says null. */
export function jobJson(job: Job) {
  const done = job.status === JobStatus.DONE;
  const failed = job.status === JobStatus.FAILED;
  return {
    job_id: job.jobId,
    status: jobStatusName(job.status),
    model: job.model,
    created_at: iso(job.createdAt),
    started_at: iso(job.startedAt),
    finished_at: iso(job.finishedAt),
    result: done
      ? { image_url: job.result?.imageUrl ?? null, text: job.result?.text ?? null, mime_type: job.result?.mimeType ?? null }
      : null,
    error: failed ? (job.error ?? "generation_failed") : (job.error || null),
    error_message: failed ? (job.errorMessage ?? null) : (job.errorMessage || null),
    usage: {
      prompt_token_count: job.usage?.promptTokenCount ?? 0,
      candidates_token_count: job.usage?.candidatesTokenCount ?? 0,
      total_token_count: job.usage?.totalTokenCount ?? 0,
      reserved: job.usage?.reserved ?? "0.00",
      charged: job.usage?.charged ?? "0.00",
    },
  };
}

export function balanceJson(balance: Balance | undefined) {
  return {
    balance: balance?.balance ?? "0.00",
    reserved: balance?.reserved ?? "0.00",
    available: balance?.available ?? "0.00",
    currency: balance?.currency ?? "USD",
  };
}

/** "credit" for LEDGER_ENTRY_TYPE_CREDIT: the proto's enum names, lower-cased and without the prefix. */
const ENTRY_TYPES = new Map(LedgerEntryTypeSchema.values.map((value) => [value.number, value.name.replace(/^LEDGER_ENTRY_TYPE_/, "").toLowerCase()]));

/** One entry of GET /api/v1/ledger: every field present, null where it does not apply. */
export function ledgerEntryJson(entry: LedgerEntry) {
  return {
    entry_id: entry.entryId,
    type: ENTRY_TYPES.get(entry.type) ?? "unknown",
    amount: entry.amount,
    balance_after: entry.balanceAfter,
    job_id: entry.jobId ?? null,
    model: entry.model ?? null,
    created_at: iso(entry.createdAt),
    reserved_change: entry.reservedChange,
    reserved_after: entry.reservedAfter,
    key_id: entry.keyId ?? null,
    prompt_token_count: Number(entry.promptTokenCount),
    candidates_token_count: Number(entry.candidatesTokenCount),
    reason: entry.reason === "" ? null : entry.reason,
  };
}

/** GET /api/v1/usage: the group under its own name (model, key_id or day). */
export function usageJson(usage: { from?: Timestamp; to?: Timestamp; rows: UsageRow[] } | undefined) {
  const groupName = { model: "model", keyId: "key_id", day: "day" } as const;
  return {
    from: iso(usage?.from),
    to: iso(usage?.to),
    rows: (usage?.rows ?? []).map((row) => ({
      ...(row.group.case ? { [groupName[row.group.case]]: row.group.value } : {}),
      requests: Number(row.requests),
      prompt_token_count: Number(row.promptTokenCount),
      candidates_token_count: Number(row.candidatesTokenCount),
      spend: row.spend,
    })),
  };
}
