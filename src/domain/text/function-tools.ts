import { badRequest } from "../errors/domain-error.js";

const refused = (field: string, why: string) => badRequest("unsupported_field", `${field} is not supported by this API: ${why}`, { field });

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The members of the vendor's FunctionDeclaration. */
const DECLARATION_KEYS = new Set(["name", "description", "parameters", "parametersJsonSchema", "response", "responseJsonSchema", "behavior"]);

const CALLING_CONFIG_KEYS = new Set(["mode", "allowedFunctionNames"]);

/** The vendor's function-calling modes. */
export const FUNCTION_CALLING_MODES = new Set(["MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"]);

/**
 * Only function declarations are offered: each tool may hold only
 * `functionDeclarations`, each a named declaration. A built-in tool
 * (googleSearch, codeExecution, urlContext, …) is billed by the vendor apart
 * from tokens, and is refused naming it.
 */
export function checkTools(tools: unknown): void {
  if (!Array.isArray(tools)) throw refused("tools", "expected a list of tools");
  tools.forEach((tool, i) => {
    if (!isObject(tool)) throw refused(`tools[${i}]`, "expected a tool object");
    for (const key of Object.keys(tool)) {
      if (key !== "functionDeclarations") {
        throw refused(`tools[${i}].${key}`, `the built-in tool ${key} is not offered; only functionDeclarations are`);
      }
    }
    const declarations = tool.functionDeclarations;
    if (declarations === undefined) return;
    if (!Array.isArray(declarations)) throw refused(`tools[${i}].functionDeclarations`, "expected a list of function declarations");
    declarations.forEach((declaration, j) => {
      const field = `tools[${i}].functionDeclarations[${j}]`;
      if (!isObject(declaration)) throw refused(field, "expected a function declaration");
      for (const key of Object.keys(declaration)) {
        if (!DECLARATION_KEYS.has(key)) throw refused(`${field}.${key}`, "not a function declaration's field");
      }
      if (typeof declaration.name !== "string" || declaration.name === "") throw refused(`${field}.name`, "a declaration needs a name");
    });
  });
}

/** toolConfig: only functionCallingConfig {mode, allowedFunctionNames}. */
export function checkToolConfig(config: unknown): void {
  if (!isObject(config)) throw refused("toolConfig", "expected an object");
  for (const key of Object.keys(config)) {
    if (key !== "functionCallingConfig") throw refused(`toolConfig.${key}`, "only functionCallingConfig is offered");
  }
  const calling = config.functionCallingConfig;
  if (calling === undefined) return;
  if (!isObject(calling)) throw refused("toolConfig.functionCallingConfig", "expected an object");
  for (const key of Object.keys(calling)) {
    if (!CALLING_CONFIG_KEYS.has(key)) throw refused(`toolConfig.functionCallingConfig.${key}`, "not a function-calling option");
  }
  if (calling.mode !== undefined && !(typeof calling.mode === "string" && FUNCTION_CALLING_MODES.has(calling.mode))) {
    throw refused("toolConfig.functionCallingConfig.mode", `expected one of ${[...FUNCTION_CALLING_MODES].join(", ")}`);
  }
  const names = calling.allowedFunctionNames;
  if (names !== undefined && !(Array.isArray(names) && names.every((name) => typeof name === "string"))) {
    throw refused("toolConfig.functionCallingConfig.allowedFunctionNames", "expected a list of function names");
  }
}
