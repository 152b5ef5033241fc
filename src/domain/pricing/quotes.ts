import { perMillion, times, type Money } from "../money.js";
import { DomainError } from "../errors/domain-error.js";
import type { ModelPrices } from "./price-table.js";

/** Token usage as the provider reports it, split by output modality. */
export interface TokenUsage {
  readonly promptTokens: number;
  /** Text output, thinking included (the vendor bills thoughts as output). */
  readonly textOutputTokens: number;
  readonly videoOutputTokens: number;
  /** Of textOutputTokens, those the model spent thinking (its thoughtsTokenCount). */
  readonly thoughtTokens?: number;
}

function missing(model: string, what: string): DomainError {
  // A model without a configured price must never be served for free.
  return new DomainError("unavailable", "price_not_configured", `no ${what} price is configured for ${model}`);
}

export function imagePrice(model: string, prices: ModelPrices | undefined, resolution: string): Money {
  const price = prices?.perImage?.[resolution];
  if (price === undefined) throw missing(model, `${resolution} image`);
  return price;
}

export function videoPrice(model: string, prices: ModelPrices | undefined, resolution: string, seconds: number): Money {
  const perSecond = prices?.perSecond?.[resolution];
  if (perSecond === undefined) throw missing(model, `${resolution} per-second`);
  return times(perSecond, seconds);
}

/** input price × prompt tokens + output prices × output tokens, exact. */
export function tokenCost(model: string, prices: ModelPrices | undefined, usage: TokenUsage): Money {
  if (prices?.inputPerMillion === undefined || prices.outputPerMillion === undefined) throw missing(model, "token");
  return (
    perMillion(prices.inputPerMillion, usage.promptTokens) +
    perMillion(prices.outputPerMillion, usage.textOutputTokens) +
    perMillion(prices.videoOutputPerMillion ?? prices.outputPerMillion, usage.videoOutputTokens)
  );
}

/**
 * The reservation for a text request: the prompt at the input price plus the
 * largest possible answer (the allowance `maxOutputTokens` plus the thinking
 * reserved, `thinkingTokens`) at the dearest output price. Output is bounded
 * (the upstream is held to their sum, which bounds thinking too); the
 * prompt is bounded by the vendor's media rules (domain/text/media-tokens.ts)
 * but counted by the upstream, which may still count more: the charge follows
 * the upstream's count, never beyond hold + available (pricing/settlement.ts),
 * and the rest is recorded as a shortfall.
 */
export function tokenEstimate(
  model: string, prices: ModelPrices | undefined, promptTokens: number, maxOutputTokens: number, thinkingTokens = 0,
): Money {
  if (prices?.inputPerMillion === undefined || prices.outputPerMillion === undefined) throw missing(model, "token");
  const dearestOutput =
    prices.videoOutputPerMillion !== undefined && prices.videoOutputPerMillion > prices.outputPerMillion
      ? prices.videoOutputPerMillion
      : prices.outputPerMillion;
  return perMillion(prices.inputPerMillion, promptTokens) + perMillion(dearestOutput, maxOutputTokens + thinkingTokens);
}
