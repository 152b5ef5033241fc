import { DomainError } from "../../domain/errors/domain-error.js";
import type { ModelSpec } from "../../domain/catalog/models.js";
import type { SettingsStore } from "../../ports/settings-store.js";

/** Paused project or model: 503 with Retry-After, before anything is reserved or stored. */
export async function requireAvailable(settings: SettingsStore, model: ModelSpec, retryAfterSeconds: number): Promise<void> {
  if (await settings.isProjectPaused()) {
    throw new DomainError("unavailable", "project_paused", "the project is paused; retry later", {}, retryAfterSeconds);
  }
  if ((await settings.pausedModels()).has(model.id)) {
    throw new DomainError("unavailable", "model_paused", `${model.id} is paused; retry later`, { model: model.id }, retryAfterSeconds);
  }
}
