import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { DomainError } from "../../domain/errors/domain-error.js";
import { checkTextLength, MAX_NAME_CHARACTERS } from "../../domain/validation/text-fields.js";
import type { GenerationProvider } from "../../ports/provider.js";
import type { Audit } from "../audit/audit-trail.js";
import type { SettingsStore } from "../../ports/settings-store.js";

/** The provider's upstream routes as the operator sees and pauses them (AdminService). */
export async function routeList(provider: Pick<GenerationProvider, "routes">) {
  return (await provider.routes()).map((route) => ({
    name: route.name,
    baseUrl: route.baseUrl,
    models: [...route.models],
    weight: route.weight,
    timeoutMs: route.timeoutMs,
    maxInputImages: route.maxInputImages,
    paused: route.paused,
    healthy: route.healthy,
    requests: BigInt(route.requests),
    failures: BigInt(route.failures),
    consecutiveFailures: route.consecutiveFailures,
    lastError: route.lastError ?? "",
    lastErrorAt: route.lastErrorAt && timestampFromDate(route.lastErrorAt),
    lastSuccessAt: route.lastSuccessAt && timestampFromDate(route.lastSuccessAt),
  }));
}

/** Pauses a route (no new request goes to it) or resumes it; an unknown name is route_not_found. */
export async function pauseRoute(
  deps: { readonly provider: Pick<GenerationProvider, "routes">; readonly settings: Pick<SettingsStore, "setRoutePaused" | "pausedRoutes"> },
  name: string, paused: boolean, audit?: Audit,
) {
  checkTextLength("name", name, MAX_NAME_CHARACTERS);
  if (!(await deps.provider.routes()).some((route) => route.name === name)) {
    throw new DomainError("not_found", "route_not_found", `no upstream route named "${name}"`);
  }
  const before = (await deps.settings.pausedRoutes()).has(name);
  await deps.settings.setRoutePaused(name, paused, audit?.("route.paused", { subject: name, before: { paused: before }, after: { paused } }));
  return { name, paused };
}
