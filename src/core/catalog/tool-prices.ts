import type { ToolPrice } from "../../../gen/generation/v1/admin_service_pb.js";
import { formatToolPrice, knownTool, parseToolPrice } from "../../domain/pricing/tool-prices.js";
import type { SettingsStore } from "../../ports/settings-store.js";
import type { Audit } from "../audit/audit-trail.js";

/** The built-in tools' per-call prices as the operator sets them (AdminService) and lists them with the models' prices. */

/** Every priced built-in tool, by name. */
export async function toolPriceList(settings: Pick<SettingsStore, "toolPrices">) {
  const prices = await settings.toolPrices();
  return [...prices].sort(([a], [b]) => a.localeCompare(b)).map(([tool, price]) => ({ tool, perCall: formatToolPrice(price) }));
}

/** Sets a built-in tool's per-call price (404 unknown_tool, 400 invalid_price); answers it as now in force. */
export async function setToolPrice(settings: Pick<SettingsStore, "setToolPrice" | "toolPrices">, price: ToolPrice | undefined, audit?: Audit) {
  const tool = knownTool(price?.tool ?? "");
  const perCall = parseToolPrice(price?.perCall ?? "");
  const previous = (await settings.toolPrices()).get(tool);
  const change = { subject: tool, before: previous === undefined ? undefined : { per_call: formatToolPrice(previous) }, after: { per_call: formatToolPrice(perCall) } };
  await settings.setToolPrice(tool, perCall, audit?.("tool_price.set", change));
  return { tool, perCall: formatToolPrice(perCall) };
}

/** Removes a built-in tool's price: calls declaring it are refused again. */
export async function deleteToolPrice(settings: Pick<SettingsStore, "toolPrices" | "setToolPrice">, name: string, audit?: Audit) {
  const tool = knownTool(name);
  const previous = (await settings.toolPrices()).get(tool);
  const removed = previous !== undefined;
  if (removed) await settings.setToolPrice(tool, undefined, audit?.("tool_price.deleted", { subject: tool, before: { per_call: formatToolPrice(previous) } }));
  return { tool, removed };
}
