import { ScalarType, type DescField, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { timestampMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import { LRUCache } from "lru-cache";
import { described, orNull } from "./proto-json-schema.js";

/**
 * The REST answers of /api/v1 and /admin/v1 are views of protobuf messages: proto field names, every field present
 * (null where it does not apply), enums as lower-case words, int64 as numbers, timestamps as ISO strings. A view
 * derives both the JSON and its schema from the message's descriptor, so the two cannot drift apart.
 */

type Schema = Record<string, unknown>;

/** How one field appears beyond what its descriptor says. */
export interface FieldView<M> {
  /** Keywords over the derived schema (money; a description where the proto comment's does not fit REST). */
  readonly schema?: Schema;
  /** An empty string is answered null (and the schema takes null). */
  readonly emptyIsNull?: boolean;
  /** The value answered, where the descriptor's reading is not it. */
  readonly json?: (message: M) => unknown;
  /** A message field whose own view is answered in its place, its fields beside the others. */
  readonly inline?: RestView<never>;
}

export interface RestView<M> {
  readonly schema: { type: "object"; properties: Record<string, Schema>; required: string[] } & Schema;
  /** An absent message is answered with every field null. */
  json(message: M | undefined): Record<string, unknown>;
}

/** The enum's value names without their shared prefix, lower-cased ("done" for JOB_STATUS_DONE); the zero value is "unknown". */
export function enumWords(desc: NonNullable<DescField["enum"]>): Map<number, string> {
  return new Map(desc.values.map((value) => [value.number, value.number === 0 ? "unknown" : value.localName.toLowerCase()]));
}

/** ISO strings of the instants formatted lately: a polled job's times are formatted once, not on every GET. */
const isoByMs = new LRUCache<number, string>({ max: 4_096 });

export function iso(timestamp: Timestamp | undefined): string | null {
  if (!timestamp) return null;
  const ms = timestampMs(timestamp);
  let text = isoByMs.get(ms);
  if (text === undefined) isoByMs.set(ms, (text = new Date(ms).toISOString()));
  return text;
}

/** The JSON types of the scalars that are not integers. */
const NOT_INTEGER: Partial<Record<ScalarType, string>> = {
  [ScalarType.BOOL]: "boolean", [ScalarType.STRING]: "string", [ScalarType.BYTES]: "string",
  [ScalarType.DOUBLE]: "number", [ScalarType.FLOAT]: "number",
};

function derivedSchema(field: DescField): Schema {
  if (field.fieldKind === "enum") return { type: "string", enum: [...enumWords(field.enum).entries()].filter(([n]) => n !== 0).map(([, w]) => w) };
  if (field.fieldKind === "message") return field.message.typeName === "google.protobuf.Timestamp" ? { type: "string", format: "date-time" } : {};
  if (field.fieldKind === "list") return { type: "array", items: { type: "string" } };
  if (field.fieldKind !== "scalar") return {};
  const schema = { type: NOT_INTEGER[field.scalar] ?? "integer" };
  return field.proto.proto3Optional ? orNull(schema) : schema;
}

function derivedJson(field: DescField, value: unknown): unknown {
  if (value === undefined) return null;
  if (field.fieldKind === "enum") return enumWords(field.enum).get(value as number) ?? "unknown";
  if (field.fieldKind === "message") return iso(value as Timestamp);
  return typeof value === "bigint" ? Number(value) : value;
}

/** The view of `desc`: its fields in order, each as derived or as `fields` says (`false` leaves it out). */
export function restView<D extends DescMessage>(
  desc: D,
  fields: { readonly [name: string]: FieldView<MessageShape<D>> | false } = {},
  extra: Schema = {},
): RestView<MessageShape<D>> {
  type M = MessageShape<D>;
  const properties: Record<string, Schema> = {};
  const required: string[] = [];
  const readers: ((message: M, json: Record<string, unknown>) => void)[] = [];
  for (const field of desc.fields) {
    const view = fields[field.name] ?? {};
    if (view === false) continue;
    if (view.inline) {
      Object.assign(properties, view.inline.schema.properties);
      required.push(...view.inline.schema.required);
      const inline = view.inline as RestView<unknown>;
      readers.push((message, json) => Object.assign(json, inline.json((message as Record<string, unknown>)[field.localName])));
      continue;
    }
    const derived = derivedSchema(field);
    properties[field.name] = described(field, { ...(view.emptyIsNull ? orNull(derived) : derived), ...view.schema });
    if (field.oneof) {
      // One of a group: present under its own name when it is the one set.
      const group = field.oneof.localName;
      readers.push((message, json) => {
        const { case: set, value } = (message as Record<string, { case?: string; value?: unknown }>)[group]!;
        if (set === field.localName) json[field.name] = value;
      });
      continue;
    }
    required.push(field.name);
    readers.push((message, json) => {
      const value = (message as Record<string, unknown>)[field.localName];
      json[field.name] = view.json ? view.json(message) : view.emptyIsNull && value === "" ? null : derivedJson(field, value);
    });
  }
  return {
    schema: { type: "object", properties, required, ...extra },
    json(message) {
      const json: Record<string, unknown> = {};
      for (const read of readers) read(message ?? ({} as M), json);
      return json;
    },
  };
}
