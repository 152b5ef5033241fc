/**
 * A minimal valid instance of a schema in the vendor's OpenAPI subset (type in
 * capitals or not, properties, required, enum, items, minItems, nullable,
 * anyOf, minimum) or in JSON Schema (the same words, `type` possibly a list,
 * const): an object with its required properties only, the first enum value,
 * the least number, an empty or minimal list. Deterministic.
 */
export function schemaInstance(schema: unknown, depth = 0): unknown {
  if (typeof schema !== "object" || schema === null || depth > 32) return null;
  const s = schema as Record<string, unknown>;
  if ("const" in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  for (const key of ["anyOf", "oneOf"]) {
    const options = s[key];
    if (Array.isArray(options) && options.length > 0) return schemaInstance(options[0], depth + 1);
  }
  const types = (Array.isArray(s.type) ? s.type : [s.type]).filter((t): t is string => typeof t === "string").map((t) => t.toLowerCase());
  const type = types.find((t) => t !== "null") ?? types[0] ?? (s.properties ? "object" : s.items ? "array" : undefined);
  switch (type) {
    case "object": {
      const properties = (typeof s.properties === "object" && s.properties !== null ? s.properties : {}) as Record<string, unknown>;
      const required = Array.isArray(s.required) ? s.required.filter((name): name is string => typeof name === "string") : [];
      const instance: Record<string, unknown> = {};
      for (const name of required) instance[name] = schemaInstance(properties[name] ?? {}, depth + 1);
      return instance;
    }
    case "array": {
      const count = Number.isInteger(s.minItems) ? (s.minItems as number) : 0;
      return Array.from({ length: Math.min(count, 16) }, () => schemaInstance(s.items ?? {}, depth + 1));
    }
    case "string": {
      const length = Number.isInteger(s.minLength) ? Math.min(s.minLength as number, 1024) : 0;
      return "x".repeat(length);
    }
    case "integer":
      return typeof s.minimum === "number" ? Math.ceil(s.minimum) : 0;
    case "number":
      return typeof s.minimum === "number" ? s.minimum : 0;
    case "boolean":
      return false;
    default:
      return null;
  }
}
