import type { ToolPrice } from "../../../gen/generation/v1/admin_service_pb.js";
import { formatToolPrice, knownTool, parseToolPrice } from "../../domain/pricing/tool-prices.js";
import type { SettingsStore } from "../../ports/settings-store.js";

/** The built-in tools' per-call prices as the operator sets them (AdminService) and lists them with the models' prices. */

/** Every priced built-in tool, by name. */
export async function toolPriceList(settings: Pick<SettingsStore, "toolPrices">) {
  const prices = await settings.toolPrices();
  return [...prices].sort(([a], [b]) => a.localeCompare(b)).map(([tool, price]) => ({ tool, perCall: formatToolPrice(price) }));
}

/** Sets a built-in tool's per-call price (404 unknown_tool, 400 invalid_price); answers it as now in force. */
export async function setToolPrice(settings: Pick<SettingsStore, "setToolPrice">, price: ToolPrice | undefined) {
  const tool = knownTool(price?.tool ?? "");
  const perCall = parseToolPrice(price?.perCall ?? "");
  await settings.setToolPrice(tool, perCall);
  return { tool, perCall: formatToolPrice(perCall) };
}

/** Removes a built-in tool's price: calls declaring it are refused again. */
export async function deleteToolPrice(settings: Pick<SettingsStore, "toolPrices" | "setToolPrice">, name: string) {
  const tool = knownTool(name);
  const removed = (await settings.toolPrices()).has(tool);
  if (removed) await settings.setToolPrice(tool, undefined);
  return { tool, removed };
}
