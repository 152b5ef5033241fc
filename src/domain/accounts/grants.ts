import type { ModelSpec } from "../catalog/models.js";

export const ALL_MODELS_GRANT = "*";

/** `*` covers every model except those that must be granted by name (spec 5.3). */
export function isModelGranted(grants: readonly string[], model: ModelSpec): boolean {
  if (grants.includes(model.id)) return true;
  return grants.includes(ALL_MODELS_GRANT) && !model.needsExplicitGrant;
}
