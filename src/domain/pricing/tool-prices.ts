import { DomainError } from "../errors/domain-error.js";
import { formatMoney, type Money } from "../money.js";
import { MAX_PRICE, parseAmountField } from "../validation/amounts.js";

/**
 * The vendor's built-in tools an operator may price per call (the keys of a
 * `tools[]` entry other than `functionDeclarations`, in lowerCamelCase). A
 * priced tool is forwarded; an unpriced one is refused naming it.
 */
export const BUILT_IN_TOOLS = [
  "googleSearch", "googleSearchRetrieval", "codeExecution", "urlContext", "googleMaps", "enterpriseWebSearch", "fileSearch", "computerUse",
] as const;

/** Per-call prices of the built-in tools the operator offers, by tool name. */
export type ToolPrices = ReadonlyMap<string, Money>;

/** The prefix of a tool's row in the stores' price table: model ids never contain ":". */
export const TOOL_PRICE_KEY_PREFIX = "tool:";

/** A built-in tool's name, or 404 unknown_tool (what the operator's calls naming one answer). */
export function knownTool(name: string): string {
  if (!(BUILT_IN_TOOLS as readonly string[]).includes(name)) {
    throw new DomainError("not_found", "unknown_tool", `unknown built-in tool "${name}" (known: ${BUILT_IN_TOOLS.join(", ")})`, { field: "tool" });
  }
  return name;
}

/** A per-call price as the operator sends it: a decimal string, zero allowed, at most MAX_PRICE. */
export function parseToolPrice(text: string): Money {
  return parseAmountField("per_call", text, { reason: "invalid_price", allowZero: true, max: MAX_PRICE });
}

export const formatToolPrice = (price: Money): string => formatMoney(price);

/** What the priced built-in tools a call declares cost: each distinct tool's per-call price, once. */
export function toolFee(tools: readonly string[], prices: ToolPrices): Money {
  let fee = 0n;
  for (const tool of new Set(tools)) fee += prices.get(tool) ?? 0n;
  return fee;
}
