import { ModelKind, type ModelPrice } from "../../../gen/generation/v1/model_pb.js";
import { FULL_ASPECT_RATIOS } from "../../domain/catalog/aspect-ratios.js";
import { findModel, MODELS, previewAliases, type ModelKind as DomainKind } from "../../domain/catalog/models.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import { formatModelPrices, parseModelPrices, type ModelPricesText } from "../../domain/pricing/price-table.js";
import { checkPriceTexts } from "../../domain/validation/amounts.js";
import type { Audit } from "../audit/audit-trail.js";
import type { SettingsStore } from "../../ports/settings-store.js";

/** The catalog's models and their prices, as callers list them (GenerationService) and the operator sets them (AdminService). */
export const KIND_TO_PROTO: Record<DomainKind, ModelKind> = {
  image: ModelKind.IMAGE,
  text: ModelKind.TEXT,
  video: ModelKind.VIDEO,
  multimodal_realtime: ModelKind.MULTIMODAL_REALTIME,
};

/** A model of the catalog, or 404 unknown_model (what the operator's calls naming one answer). */
export function knownModel(id: string) {
  const model = findModel(id);
  if (!model) throw new DomainError("not_found", "unknown_model", `unknown model "${id}"`);
  return model;
}

/** Every model with what a caller may ask of it, its prices and whether it is paused. */
export async function modelList(settings: Pick<SettingsStore, "prices" | "pausedModels">) {
  const [prices, paused] = await Promise.all([settings.prices(), settings.pausedModels()]);
  return {
    aspectRatios: [...FULL_ASPECT_RATIOS],
    models: MODELS.map((model) => ({
      id: model.id,
      kind: KIND_TO_PROTO[model.kind],
      resolutions: [...model.resolutions],
      aspectRatios: [...model.aspectRatios],
      aliases: previewAliases(model),
      price: { model: model.id, ...priceMessage(formatModelPrices(prices.get(model.id))) },
      paused: paused.has(model.id),
      maxOutputTokens: model.maxOutputTokens ?? 0,
      durationsSeconds: [...(model.jobDurations ?? [])],
      explicitGrantRequired: model.needsExplicitGrant === true,
    })),
  };
}

/** Pauses a model (new jobs of it answered 503) or resumes it. */
export async function pauseModel(settings: Pick<SettingsStore, "setModelPaused" | "pausedModels">, id: string, paused: boolean, audit?: Audit) {
  const model = knownModel(id);
  const before = (await settings.pausedModels()).has(model.id);
  await settings.setModelPaused(model.id, paused, audit?.("model.paused", { subject: model.id, before: { paused: before }, after: { paused } }));
  return { model: model.id, paused };
}

/** A model's prices as text, in the proto's field names. */
export function priceMessage(text: ReturnType<typeof formatModelPrices>) {
  return {
    perImage: text.per_image,
    perSecond: text.per_second,
    inputPerMillionTokens: text.input_per_million_tokens,
    outputPerMillionTokens: text.output_per_million_tokens,
    videoOutputPerMillionTokens: text.video_output_per_million_tokens,
  };
}

/** Every model's prices, in the catalog's order. */
export async function priceList(settings: Pick<SettingsStore, "prices">) {
  const prices = await settings.prices();
  return MODELS.map((m) => ({ model: m.id, ...priceMessage(formatModelPrices(prices.get(m.id))) }));
}

/** Sets a model's prices (the fields sent, the rest kept as they were); answers them as now in force. */
export async function updatePrice(settings: Pick<SettingsStore, "prices" | "setPrices">, price: ModelPrice | undefined, audit?: Audit) {
  const model = knownModel(price?.model ?? "");
  const previous = (await settings.prices()).get(model.id);
  const text = price!;
  const prices: ModelPricesText = {
    per_image: text.perImage,
    per_second: text.perSecond,
    input_per_million_tokens: text.inputPerMillionTokens,
    output_per_million_tokens: text.outputPerMillionTokens,
    video_output_per_million_tokens: text.videoOutputPerMillionTokens,
  };
  checkPriceTexts(prices);
  const next = parseModelPrices(model, prices, previous);
  const change = { subject: model.id, before: previous && formatModelPrices(previous), after: formatModelPrices(next) };
  await settings.setPrices(model.id, next, audit?.("price.updated", change));
  return { model: model.id, ...priceMessage(formatModelPrices(next)) };
}
