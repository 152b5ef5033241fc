import { createHash } from "node:crypto";

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value instanceof Uint8Array) return Buffer.from(value).toString("base64");
  if (typeof value === "bigint") return value.toString();
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value as object)
        .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

/**
 * Identifies "the same request" for the Idempotency-Key rule: the operation
 * plus the request with its keys sorted, so key order in JSON does not matter.
 */
export function requestFingerprint(operation: string, request: unknown): string {
  return createHash("sha256").update(operation).update("\n").update(JSON.stringify(canonical(request))).digest("hex");
}
