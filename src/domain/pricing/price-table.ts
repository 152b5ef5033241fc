import { formatMoney, InvalidAmountError, parseMoney, type Money } from "../money.js";
import { findModel, type ModelSpec } from "../catalog/models.js";
import { invalid } from "../errors/domain-error.js";

/** Prices of one model; only the fields of its kind are used. */
export interface ModelPrices {
  /** Image: one image, by resolution. */
  readonly perImage?: Readonly<Record<string, Money>>;
  /** Text / multimodal: per 1M prompt tokens. */
  readonly inputPerMillion?: Money;
  /** Text: per 1M output tokens; multimodal: per 1M text-output tokens. */
  readonly outputPerMillion?: Money;
  /** Multimodal: per 1M video-output tokens. */
  readonly videoOutputPerMillion?: Money;
  /** Video: one second, by resolution. */
  readonly perSecond?: Readonly<Record<string, Money>>;
}

export type PriceTable = ReadonlyMap<string, ModelPrices>;

/** The decimal-string form used by config files, proto and REST. */
export interface ModelPricesText {
  per_image?: Record<string, string>;
  input_per_million_tokens?: string;
  output_per_million_tokens?: string;
  video_output_per_million_tokens?: string;
  per_second?: Record<string, string>;
}

/** Per-1M prices carry at most 6 decimals so that a single token's price is exact. */
const MAX_PER_MILLION_DECIMALS = 6;

function parsePrice(field: string, value: string, maxDecimals = 12): Money {
  let amount: Money;
  try {
    amount = parseMoney(value);
  } catch (error) {
    if (error instanceof InvalidAmountError) throw invalid("invalid_price", `${field}: ${error.message}`, { field });
    throw error;
  }
  if (amount < 0n) throw invalid("invalid_price", `${field}: a price cannot be negative`, { field });
  const decimals = value.split(".")[1]?.replace(/0+$/, "").length ?? 0;
  if (decimals > maxDecimals) {
    throw invalid("invalid_price", `${field}: at most ${maxDecimals} decimals`, { field });
  }
  return amount;
}

function parseKeyed(field: string, values: Record<string, string> | undefined, allowed: readonly string[]) {
  if (!values || Object.keys(values).length === 0) return undefined;
  const parsed: Record<string, Money> = {};
  for (const [key, value] of Object.entries(values)) {
    if (!allowed.includes(key)) {
      throw invalid("invalid_price", `${field}: unknown resolution "${key}" (allowed: ${allowed.join(", ")})`, { field });
    }
    parsed[key] = parsePrice(`${field}.${key}`, value);
  }
  return parsed;
}

/**
 * Parses and checks one model's prices. `previous` supplies the fields the
 * update leaves empty, so an operator can change one figure at a time.
 */
export function parseModelPrices(model: ModelSpec, text: ModelPricesText, previous?: ModelPrices): ModelPrices {
  const perMillion = (field: string, value: string | undefined, keep: Money | undefined) =>
    value === undefined || value === "" ? keep : parsePrice(field, value, MAX_PER_MILLION_DECIMALS);
  // Keyed prices merge: changing the 1K price keeps the 2K and 4K ones.
  const merge = (next?: Record<string, Money>, before?: Readonly<Record<string, Money>>) =>
    next || before ? { ...before, ...next } : undefined;
  return {
    perImage: merge(parseKeyed("per_image", text.per_image, model.resolutions), previous?.perImage),
    perSecond: merge(parseKeyed("per_second", text.per_second, model.resolutions), previous?.perSecond),
    inputPerMillion: perMillion("input_per_million_tokens", text.input_per_million_tokens, previous?.inputPerMillion),
    outputPerMillion: perMillion("output_per_million_tokens", text.output_per_million_tokens, previous?.outputPerMillion),
    videoOutputPerMillion: perMillion(
      "video_output_per_million_tokens", text.video_output_per_million_tokens, previous?.videoOutputPerMillion),
  };
}

export function formatModelPrices(prices: ModelPrices | undefined): ModelPricesText {
  const keyed = (values?: Readonly<Record<string, Money>>) =>
    values ? Object.fromEntries(Object.entries(values).map(([k, v]) => [k, formatMoney(v)])) : {};
  const single = (value?: Money) => (value === undefined ? "" : formatMoney(value));
  return {
    per_image: keyed(prices?.perImage),
    per_second: keyed(prices?.perSecond),
    input_per_million_tokens: single(prices?.inputPerMillion),
    output_per_million_tokens: single(prices?.outputPerMillion),
    video_output_per_million_tokens: single(prices?.videoOutputPerMillion),
  };
}

/** Builds a table from the config file's form; unknown models are an error. */
export function parsePriceTable(source: Record<string, ModelPricesText>): Map<string, ModelPrices> {
  const table = new Map<string, ModelPrices>();
  for (const [id, text] of Object.entries(source)) {
    const model = findModel(id);
    if (!model || model.id !== id) throw new Error(`price table names an unknown model "${id}"`);
    table.set(id, parseModelPrices(model, text));
  }
  return table;
}
