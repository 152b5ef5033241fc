import { Ajv, type Options } from "ajv";
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
const COMMON: Options = { allErrors: false, strict: false, validateFormats: false, removeAdditional: false, useDefaults: false };

export function useRequestValidators(app: FastifyInstance): void {
  const text = new Ajv({ ...COMMON, coerceTypes: "array" });
  const json = new Ajv({ ...COMMON, coerceTypes: false });
  app.setValidatorCompiler<FastifySchema>(({ schema, httpPart }) => {
    const ajv = httpPart === "body" ? json : text;
    return ajv.compile(schema as object) as ReturnType<Ajv["compile"]>;
  });
}
