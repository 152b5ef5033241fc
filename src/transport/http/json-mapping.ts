import { create, fromJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { GetUsageResponseSchema, type GetUsageResponse } from "../../../gen/generation/v1/generation_service_pb.js";
import type { Balance, LedgerEntry } from "../../../gen/generation/v1/money_pb.js";
import { checkMetadata, checkMetadataShape, DomainError, type MetadataLimits } from "../../core/index.js";
import { unsupportedMediaType } from "./error-replies.js";
import { GatewayError } from "./gateway-error.js";
import { LEDGER_ENTRY, USAGE } from "./schemas/money.js";

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

export function balanceJson(balance: Balance | undefined) {
  return {
    balance: balance?.balance ?? "0.00",
    reserved: balance?.reserved ?? "0.00",
    available: balance?.available ?? "0.00",
    currency: balance?.currency ?? "USD",
  };
}

/** A page of the statement: `next_page_token` null on the last. */
export const ledgerPageJson = ({ entries, nextPageToken }: { entries: LedgerEntry[]; nextPageToken: string }) =>
  ({ entries: entries.map(LEDGER_ENTRY.json), next_page_token: nextPageToken === "" ? null : nextPageToken });

/** GET /api/v1/usage: the group under its own name (model, key_id or day). */
export const usageJson = (usage: GetUsageResponse | undefined) => USAGE.json(usage ?? create(GetUsageResponseSchema));
