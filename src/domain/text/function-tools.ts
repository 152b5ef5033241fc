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
 * Function declarations are offered: `functionDeclarations` holds named
 * declarations. A built-in tool (googleSearch, codeExecution, urlContext, …)
 * is billed by the vendor apart from tokens: it passes only when the operator
 * priced it per call (`pricedTools`, by name), with its configuration an
 * object; otherwise it is refused naming it. Returns the built-in tools declared.
 */
export function checkTools(tools: unknown, pricedTools: ReadonlySet<string> = new Set()): string[] {
  if (!Array.isArray(tools)) throw refused("tools", "expected a list of tools");
  const builtIn: string[] = [];
  tools.forEach((tool, i) => {
    if (!isObject(tool)) throw refused(`tools[${i}]`, "expected a tool object");
    for (const key of Object.keys(tool)) {
      if (key === "functionDeclarations") continue;
      if (!pricedTools.has(key)) throw refused(`tools[${i}].${key}`, `the built-in tool ${key} is not offered; only functionDeclarations are`);
      if (!isObject(tool[key])) throw refused(`tools[${i}].${key}`, `the built-in tool's configuration is an object`);
      builtIn.push(key);
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
  return builtIn;
}

/** Whether a request's tools (as the caller wrote them) name anything but function declarations: then the tools' prices are read. */
export function declaresBuiltInTool(tools: unknown): boolean {
  const builtIn = (key: string) => key !== "functionDeclarations" && key !== "function_declarations";
  return Array.isArray(tools) && tools.some((tool) => isObject(tool) && Object.keys(tool).some(builtIn));
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
