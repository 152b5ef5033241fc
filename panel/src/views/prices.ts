import type { Model, ModelPrice } from "../../../gen/generation/v1/model_pb.js";
import { ModelKind } from "../../../gen/generation/v1/model_pb.js";
import { generation } from "../rpc.js";
import { h, section, table } from "../ui.js";

const KIND: Record<number, string> = {
  [ModelKind.IMAGE]: "image", [ModelKind.TEXT]: "text", [ModelKind.VIDEO]: "video", [ModelKind.MULTIMODAL_REALTIME]: "multimodal real-time",
};

/** Every price of a model, as the spec lists them (USD). */
export function priceLines(price: ModelPrice | undefined): string[] {
  if (!price) return [];
  const lines: string[] = [];
  for (const [resolution, amount] of Object.entries(price.perImage)) lines.push(`$${amount} per image at ${resolution}`);
  for (const [resolution, amount] of Object.entries(price.perSecond)) lines.push(`$${amount} per second at ${resolution}`);
  if (price.inputPerMillionTokens) lines.push(`$${price.inputPerMillionTokens} per 1M input tokens`);
  if (price.outputPerMillionTokens) lines.push(`$${price.outputPerMillionTokens} per 1M output tokens`);
  if (price.videoOutputPerMillionTokens) lines.push(`$${price.videoOutputPerMillionTokens} per 1M video-output tokens`);
  return lines;
}

export async function loadModels(): Promise<Model[]> {
  return (await generation.listModels({})).models;
}

export async function pricesView(): Promise<HTMLElement> {
  const models = await loadModels();
  return section("Model prices",
    h("p", {}, "What each model costs. A job reserves its price when it is accepted and is charged only if it succeeds."),
    table(["Model", "Kind", "Prices", "Status"], models.map((model) => [
      h("code", {}, model.id),
      KIND[model.kind] ?? "",
      h("ul", { class: "plain" }, ...priceLines(model.price).map((line) => h("li", {}, line))),
      model.paused ? h("span", { class: "badge warn" }, "paused") : "available",
    ]), "Price table"));
}
