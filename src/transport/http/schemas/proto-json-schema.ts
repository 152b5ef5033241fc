import { ScalarType, type DescEnum, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { FIELD_DOCS } from "../../../../gen/field_docs.js";

/**
 * JSON Schemas of protobuf messages as the proto3 JSON mapping writes and
 * reads them: the vendor surface's bodies are that mapping, so its route
 * schemas come from the same descriptors as the RPCs and cannot drift from
 * them.
 *
 * - "output": what `toJson` writes (int64 as a string, enums by name); as a
 *   response schema it lets fast serialization emit every field the message
 *   can have and nothing else.
 * - "input": what `fromJson` accepts (numbers or numeric strings, enums by
 *   name or number). Requests are validated against it loosely (types only,
 *   unknown fields allowed, as the vendor ignores them); the mapping then
 *   applies its exact rules.
 */
export type Direction = "input" | "output";

export interface ProtoSchemaOptions {
  readonly direction: Direction;
  /** "json": lowerCamelCase names (the vendor's); "proto": the proto field names (snake_case). */
  readonly names?: "json" | "proto";
  /** Fields left out of the schema by name (e.g. what a route takes from its path instead). */
  readonly omit?: readonly string[];
}

type Schema = Record<string, unknown>;

const INT64 = new Set([ScalarType.INT64, ScalarType.UINT64, ScalarType.SINT64, ScalarType.FIXED64, ScalarType.SFIXED64]);
const FLOATING = new Set([ScalarType.FLOAT, ScalarType.DOUBLE]);

function scalarSchema(scalar: ScalarType, direction: Direction): Schema {
  if (scalar === ScalarType.BOOL) return { type: "boolean" };
  if (scalar === ScalarType.STRING) return { type: "string" };
  if (scalar === ScalarType.BYTES) return { type: "string", contentEncoding: "base64" };
  if (INT64.has(scalar)) return direction === "output" ? { type: "string", pattern: "^-?[0-9]+$" } : { type: ["string", "integer"] };
  // NaN and ±Infinity travel as strings.
  if (FLOATING.has(scalar)) return { type: ["number", "string"] };
  return direction === "output" ? { type: "integer" } : { type: ["integer", "string"] };
}

function enumSchema(desc: DescEnum, direction: Direction): Schema {
  const names = desc.values.map((value) => value.name);
  return direction === "output" ? { type: "string", enum: names } : { type: ["string", "integer"] };
}

/** Well-known types have their own JSON forms. */
function wellKnownSchema(typeName: string): Schema | undefined {
  switch (typeName) {
    case "google.protobuf.Struct":
      return { type: "object", additionalProperties: true };
    case "google.protobuf.Value":
      return {};
    case "google.protobuf.ListValue":
      return { type: "array" };
    case "google.protobuf.Timestamp":
      return { type: "string", format: "date-time" };
    case "google.protobuf.Duration":
      return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]+)?s$" };
    case "google.protobuf.Empty":
      return { type: "object" };
  }
  return undefined;
}

function messageSchema(desc: DescMessage, options: ProtoSchemaOptions, path: readonly string[]): Schema {
  const known = wellKnownSchema(desc.typeName);
  if (known) return known;
  // A message that contains itself is described once; deeper levels are any object.
  if (path.includes(desc.typeName)) return { type: "object", additionalProperties: true, description: desc.name };
  const inner = [...path, desc.typeName];
  const properties: Record<string, Schema> = {};
  for (const field of desc.fields) {
    if (path.length === 0 && options.omit?.includes(field.name)) continue;
    properties[options.names === "proto" ? field.name : field.jsonName] = fieldSchema(field, options, inner);
  }
  return { type: "object", properties };
}

/** A schema that also takes JSON null (what the proto JSON mapping reads as "not set"). */
export function orNull(schema: Schema): Schema {
  const type = schema.type;
  if (type === undefined) return schema;
  return { ...schema, type: [...(Array.isArray(type) ? type : [type]), "null"] };
}

function fieldSchema(field: DescField, options: ProtoSchemaOptions, path: readonly string[]): Schema {
  let schema: Schema;
  if (field.fieldKind === "list") schema = { type: "array", items: valueSchema(field.listKind, field, options, path) };
  else if (field.fieldKind === "map") schema = { type: "object", additionalProperties: valueSchema(field.mapKind, field, options, path) };
  else schema = valueSchema(field.fieldKind, field, options, path);
  return described(field, options.direction === "input" ? orNull(schema) : schema);
}

/** `schema` with the proto comment of `field` (gen/field_docs.ts) as its description, unless it has one of its own. */
export function described(field: DescField, schema: Schema): Schema {
  const docs = FIELD_DOCS[`${field.parent.typeName}.${field.name}`];
  return docs === undefined || schema.description !== undefined ? schema : { ...schema, description: docs };
}

/** Hand-written schemas of fields of `desc`, by field name, each `described`. */
export function describedFields<P extends Record<string, Schema>>(desc: DescMessage, properties: P): P {
  const fields = new Map(desc.fields.map((field) => [field.name, field]));
  return Object.fromEntries(Object.entries(properties).map(([name, schema]) => [name, described(fields.get(name)!, schema)])) as P;
}

/** One value of a field (an element of a list, a map's value). */
function valueSchema(kind: "scalar" | "enum" | "message", field: DescField, options: ProtoSchemaOptions, path: readonly string[]): Schema {
  const { scalar, enum: enumType, message } = field as { scalar?: ScalarType; enum?: DescEnum; message?: DescMessage };
  if (kind === "scalar") return scalarSchema(scalar!, options.direction);
  if (kind === "enum") return enumSchema(enumType!, options.direction);
  return messageSchema(message!, options, path);
}

/** The JSON Schema of `desc` in the proto3 JSON mapping, for one direction. */
export function protoJsonSchema(desc: DescMessage, options: ProtoSchemaOptions): Schema {
  return messageSchema(desc, options, []);
}
