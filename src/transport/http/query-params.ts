import { fromJson } from "@bufbuild/protobuf";
import type { FastifyRequest } from "fastify";
import { TimestampSchema, type Timestamp } from "@bufbuild/protobuf/wkt";
import { checkLimit, DomainError } from "../../core/index.js";
import { GatewayError } from "./gateway-error.js";

/**
 * The text of query parameters as the proto requests carry them: only the
 * syntax is judged here (what the proto cannot carry); the values' rules are
 * the domain's, applied again by the core.
 */

/** A query's parameters, typed as text only by its schema. */
export type QueryText = Record<string, string | undefined>;

/** The query; the schema's one refusal (a repeated parameter) is 400, as every other refusal of these queries. */
export function queryText(request: FastifyRequest): QueryText {
  if (request.validationError) throw new GatewayError(400, "invalid_query", request.validationError.message);
  return request.query as QueryText;
}

/** A domain rule applied to the raw query text, refused in the gateway's terms (400 and the domain's reason); the core applies it again. */
export function queryRule<T>(check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (error instanceof DomainError) throw new GatewayError(400, error.reason, error.message);
    throw error;
  }
}

/** An RFC 3339 instant, as the proto JSON mapping reads a Timestamp. */
export function timestampOf(field: string, text: string | undefined): Timestamp | undefined {
  if (text === undefined) return undefined;
  try {
    return fromJson(TimestampSchema, text);
  } catch {
    throw new GatewayError(400, "invalid_timestamp", `${field} must be an RFC 3339 time such as 2026-11-23T10:00:00Z (got "${text}")`);
  }
}

/** `limit`: digits only ("1e2", " 5" and "5.0" are not integers of the query); the bounds are the domain's. */
export function limitOf(text: string | undefined): number | undefined {
  return text === undefined ? undefined : queryRule(() => checkLimit(/^[0-9]{1,4}$/.test(text) ? Number(text) : Number.NaN, `"${text}"`));
}
