import { invalid } from "../errors/domain-error.js";
import type { ValidationLimits } from "./limits.js";

export type MetadataLimits = ValidationLimits["metadata"];

/**
 * How deep objects and arrays may nest in `metadata`, the object itself being
 * level 1. Fixed, not configurable: well under the protobuf runtime's
 * recursion limit of 100 messages (each JSON level is two Struct/Value
 * messages), and shallow enough for every recursive step after validation
 * (fingerprints, storage, webhooks) to stay far from the stack's end.
 */
export const MAX_METADATA_DEPTH = 32;

/** A metadata limit, as named in the refusal's facts (`rule`). */
export type MetadataRule = "keys" | "key_bytes" | "value_bytes" | "total_bytes" | "depth";

const tooLarge = (rule: MetadataRule, message: string, limit: number, field = "metadata") =>
  invalid("metadata_too_large", message, { field, rule, limit });

const notJson = (field: string) => invalid("invalid_metadata", `${field} must be a JSON object of JSON values`, { field });

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/** A key as a message may show it: quoted, and cut after 32 characters. */
const shown = (key: string) => JSON.stringify(key.length > 32 ? `${key.slice(0, 32)}…` : key);

/**
 * Walks one top-level value without recursion: refuses nesting deeper than
 * MAX_METADATA_DEPTH, and stops as soon as a lower bound of the value's JSON
 * size passes `maxBytes` (so a huge array or object is refused after reading
 * about `maxBytes` of it). The bound never exceeds the real size: every
 * string, key and punctuation counts at most the bytes JSON.stringify gives it.
 */
function checkShape(root: unknown, field: string, maxBytes: number): void {
  const over = () => tooLarge("value_bytes", `${field} is more than ${maxBytes} bytes as JSON`, maxBytes, field);
  const pending: { value: unknown; depth: number }[] = [{ value: root, depth: 2 }];
  let floor = 0;
  while (pending.length > 0) {
    const { value, depth } = pending.pop()!;
    if (typeof value === "string") floor += value.length + 2;
    else if (typeof value === "number") floor += 1;
    else if (typeof value === "boolean" || value === null) floor += 4;
    else if (value === undefined) continue;
    else if (typeof value !== "object") throw notJson("metadata");
    else {
      if (depth > MAX_METADATA_DEPTH) {
        throw tooLarge("depth", `metadata nests objects and arrays more than ${MAX_METADATA_DEPTH} levels deep`, MAX_METADATA_DEPTH, field);
      }
      if (Array.isArray(value)) {
        // Brackets and commas; the elements count when they are taken.
        floor += value.length === 0 ? 2 : value.length + 1;
        if (floor > maxBytes) throw over();
        for (const item of value) pending.push({ value: item, depth: depth + 1 });
      } else {
        floor += 2;
        let entries = 0;
        for (const key in value) {
          const child = (value as Record<string, unknown>)[key];
          if (!Object.hasOwn(value, key) || child === undefined) continue;
          floor += key.length + 3 + (entries++ > 0 ? 1 : 0);
          if (floor > maxBytes) throw over();
          pending.push({ value: child, depth: depth + 1 });
        }
      }
    }
    if (floor > maxBytes) throw over();
  }
}

/**
 * The rules of `metadata` that need no configuration: a JSON object of JSON
 * values, nested at most MAX_METADATA_DEPTH levels. Walks it without
 * recursion, so any depth is refused without touching the stack's end. For a
 * caller that has no limits at hand; checkMetadata applies these too.
 */
export function checkMetadataShape(metadata: unknown): void {
  if (metadata === undefined || metadata === null) return;
  if (!isObject(metadata)) throw notJson("metadata");
  for (const key in metadata) {
    // A key is only named in the refusal's facts when it is of a sensible size.
    if (Object.hasOwn(metadata, key)) checkShape(metadata[key], key.length > 256 ? "metadata" : `metadata.${key}`, Infinity);
  }
}

/**
 * The limits of a request's `metadata`, cheapest first: the number of
 * top-level keys, the UTF-8 bytes of each key, nesting depth, the bytes of
 * each top-level value as JSON, then the bytes of the whole object as JSON.
 * Undefined and null mean "no metadata". The gateway calls this on the raw
 * JSON before converting it to a protobuf Struct, the core again on what it
 * received.
 */
export function checkMetadata(metadata: unknown, limits: MetadataLimits): void {
  if (metadata === undefined || metadata === null) return;
  if (!isObject(metadata)) throw notJson("metadata");
  let keys = 0;
  for (const key in metadata) {
    if (Object.hasOwn(metadata, key) && metadata[key] !== undefined && ++keys > limits.maxKeys) {
      throw tooLarge("keys", `metadata has more than ${limits.maxKeys} keys`, limits.maxKeys);
    }
  }
  let total = 2;
  let entries = 0;
  for (const key in metadata) {
    const value = metadata[key];
    if (!Object.hasOwn(metadata, key) || value === undefined) continue;
    if (key.length > limits.maxKeyBytes || Buffer.byteLength(key, "utf8") > limits.maxKeyBytes) {
      throw tooLarge("key_bytes", `metadata key ${shown(key)} is longer than ${limits.maxKeyBytes} bytes of UTF-8`, limits.maxKeyBytes);
    }
    const field = `metadata.${key}`;
    checkShape(value, field, limits.maxValueBytes);
    const valueBytes = Buffer.byteLength(JSON.stringify(value), "utf8");
    if (valueBytes > limits.maxValueBytes) {
      throw tooLarge("value_bytes", `${field} is more than ${limits.maxValueBytes} bytes as JSON`, limits.maxValueBytes, field);
    }
    total += (entries++ > 0 ? 1 : 0) + Buffer.byteLength(JSON.stringify(key), "utf8") + 1 + valueBytes;
    if (total > limits.maxTotalBytes) {
      throw tooLarge("total_bytes", `metadata is more than ${limits.maxTotalBytes} bytes as JSON`, limits.maxTotalBytes);
    }
  }
}
