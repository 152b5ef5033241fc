import type { Money } from "../money.js";
import type { GenerationSpec } from "../validation/generation-request.js";
import { promptTokenEstimate } from "../text/tokens.js";
import type { ModelPrices } from "./price-table.js";
import { imagePrice, tokenEstimate, videoPrice } from "./quotes.js";

/** What to reserve when a job is accepted (billing rules 1 and 2). */
export function quoteGeneration(spec: GenerationSpec, prices: ModelPrices | undefined): Money {
  const model = spec.model;
  switch (model.kind) {
    case "image":
      return imagePrice(model.id, prices, spec.resolution!);
    case "video":
      return videoPrice(model.id, prices, spec.resolution!, spec.durationSeconds!);
    case "text":
    case "multimodal_realtime":
      return tokenEstimate(
        model.id, prices, promptTokenEstimate(spec.prompt, spec.inputImageUrls.length + spec.inlineImages.length), model.maxOutputTokens!,
      );
  }
}
