import { Ajv, type ErrorObject, type Options } from "ajv";
import type { FastifyInstance, FastifySchema } from "fastify";

/**
 * How route schemas validate requests. Two validators, because the parts of
 * a request differ:
 *  - the path, the query and headers are text: "20" is read as the integer a
 *    schema asks for (coerced);
 *  - a JSON body is never coerced: a JSON number where money (a string) is
 *    expected is refused, not turned into "10" — a float never becomes a
 *    balance. Unknown fields stay (and are ignored), defaults are not filled
 *    in: what reaches the handler is what the client sent.
 *
 * Schemas also carry OpenAPI's annotations (examples, descriptions), so
 * unknown keywords are allowed.
 */
// verbose: an error carries the schema it broke, so its message can say what the field is (money, say).
const COMMON: Options = { allErrors: false, strict: false, validateFormats: false, removeAdditional: false, useDefaults: false, verbose: true };

const TYPE_WORDS: Record<string, string> = {
  string: "a string", integer: "an integer", number: "a number", boolean: "true or false", array: "an array", object: "a JSON object",
};

/** A field as the messages name it: `amount`, `per_image.2K`, `contents.0.parts` (the body itself: "the request body"). */
function fieldName(error: ErrorObject, part: string): string {
  const path = error.instancePath.split("/").slice(1).map((step) => step.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (error.keyword === "required") path.push((error.params as { missingProperty: string }).missingProperty);
  if (path.length > 0) return path.join(".");
  return part === "body" ? "the request body" : `the ${part}`;
}

/**
 * One sentence for a schema refusal, starting with the field's name as the
 * domain's messages do (`amount must be …`); null, which every body field
 * takes as "not set", is not offered as a type.
 */
export function validationMessage(error: ErrorObject, part: string): string {
  const field = fieldName(error, part);
  const parent = error.parentSchema as { "x-money"?: boolean } | undefined;
  switch (error.keyword) {
    case "required":
      return `${field} is required`;
    case "type": {
      if (parent?.["x-money"]) return `${field} must be a decimal string (money, e.g. "10.00"), never a JSON number`;
      const wanted = ([] as string[]).concat(error.schema as string | string[]).filter((type) => type !== "null");
      return `${field} must be ${wanted.map((type) => TYPE_WORDS[type] ?? type).join(" or ")}`;
    }
    case "enum":
      return `${field} must be one of ${(error.schema as unknown[]).map((value) => JSON.stringify(value)).join(", ")}`;
    default:
      return `${field} ${error.message ?? "is not valid"}`;
  }
}

export function useRequestValidators(app: FastifyInstance): void {
  const text = new Ajv({ ...COMMON, coerceTypes: "array" });
  const json = new Ajv({ ...COMMON, coerceTypes: false });
  app.setValidatorCompiler<FastifySchema>(({ schema, httpPart }) => {
    const ajv = httpPart === "body" ? json : text;
    return ajv.compile(schema as object) as ReturnType<Ajv["compile"]>;
  });
  // The first refusal as one sentence; the error handler answers it as 422 validation_failed (or the vendor's 400).
  app.setSchemaErrorFormatter((errors, part) => new Error(validationMessage(errors[0]!, part)));
}
