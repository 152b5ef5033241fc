import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { findModel, type ModelSpec } from "../../../src/domain/catalog/models.js";
import { DomainError } from "../../../src/domain/errors/domain-error.js";
import { formatMoney, parseMoney, perMillion, times, ZERO } from "../../../src/domain/money.js";
import { formatModelPrices, parseModelPrices, parsePriceTable, type ModelPrices } from "../../../src/domain/pricing/price-table.js";
import { jobPromptTokenBound, quoteGeneration } from "../../../src/domain/pricing/quote-generation.js";
import { imagePrice, tokenCost, tokenEstimate, videoPrice } from "../../../src/domain/pricing/quotes.js";
import { boundedCharge, countsAsOpenHold } from "../../../src/domain/pricing/settlement.js";
import { MAX_CREDIT, parseAmountField } from "../../../src/domain/validation/amounts.js";
import type { GenerationSpec } from "../../../src/domain/validation/generation-request.js";
import { png } from "./image-headers.js";

const IMAGE = findModel("aimodel-3-pro-image")!;
const VIDEO = findModel("videomodel-3.1-generate-001")!;
const TEXT = findModel("aimodel-3.5-flash")!;
const OMNI = findModel("aimodel-omni-1.1-flash")!;
const $ = parseMoney;

/** The refusal `work` throws; fails the test when it throws nothing or not a DomainError. */
function refusal(work: () => unknown): DomainError {
  try {
    work();
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    return error;
  }
  assert.fail("expected a refusal");
}

describe("money arithmetic", () => {
  it("when a price is multiplied by a count, then the result is exact, for numbers and bigints alike", () => {
    assert.equal(times($("0.134"), 3), $("0.402"));
    assert.equal(times($("0.40"), 8n), $("3.20"));
    assert.equal(perMillion($("2.50"), 1_000_000n), $("2.50"));
    assert.equal(ZERO, 0n);
  });

  it("when an amount has one or two significant decimals, then it is shown with two", () => {
    assert.equal(formatMoney($("0.1")), "0.10");
    assert.equal(formatMoney($("100.25")), "100.25");
    assert.equal(formatMoney($("-1234.5")), "-1234.50");
    assert.equal(formatMoney(1n), "0.000000000001");
  });

  it("when an amount has thirteen decimals, then the refusal says twelve is the most", () => {
    assert.throws(() => parseMoney("1.0000000000001"), { message: 'invalid amount "1.0000000000001": at most 12 decimal places' });
  });

  it("when an operator's amount has too many whole digits, then it is refused as too large before its form is read", () => {
    const credit = { reason: "invalid_amount", allowZero: false, max: MAX_CREDIT };
    // Eleven whole digits pass 1 000 000 000 whatever follows them.
    for (const value of ["10000000000.5.5", "10000000000.x"]) {
      assert.equal(refusal(() => parseAmountField("amount", value, credit)).message, "amount must be at most 1000000000.00", value);
    }
    // Not digits only: then it is its form that is wrong.
    for (const value of ["1000000000x0", "10000000000x", "1000000000 0", "-10000000000"]) {
      assert.match(refusal(() => parseAmountField("amount", value, credit)).message, /^amount must be a decimal string/, value);
    }
  });
});

describe("price table: parsing an operator's prices", () => {
  it("when an image model's prices are given by resolution, then each is parsed exactly and the rest stay unset", () => {
    const prices = parseModelPrices(IMAGE, { per_image: { "1K": "0.134", "2K": "0", "4K": "0.000000000001" } });
    assert.deepEqual(prices, {
      perImage: { "1K": $("0.134"), "2K": 0n, "4K": 1n },
      perSecond: undefined, inputPerMillion: undefined, outputPerMillion: undefined, videoOutputPerMillion: undefined,
    });
  });

  it("when a video model's prices are given per second, then they are read for its own resolutions", () => {
    const prices = parseModelPrices(VIDEO, { per_second: { "720p": "0.40", "1080p": "0.50", "4k": "0.60" } });
    assert.deepEqual(prices.perSecond, { "720p": $("0.40"), "1080p": $("0.50"), "4k": $("0.60") });
    assert.equal(prices.perImage, undefined);
  });

  it("when a resolution the model does not make is priced, then it is refused, listing the allowed ones", () => {
    const error = refusal(() => parseModelPrices(IMAGE, { per_image: { "1K": "0.1", "8K": "1" } }));
    assert.equal(error.category, "invalid");
    assert.equal(error.reason, "invalid_price");
    assert.equal(error.message, 'per_image: unknown resolution "8K" (allowed: 1K, 2K, 4K)');
    assert.deepEqual(error.facts, { field: "per_image" });
    assert.equal(refusal(() => parseModelPrices(VIDEO, { per_second: { "1K": "1" } })).facts.field, "per_second");
    assert.equal(refusal(() => parseModelPrices(TEXT, { per_image: { "1K": "1" } })).message, 'per_image: unknown resolution "1K" (allowed: )');
  });

  it("when a keyed price is not a decimal, then it is refused naming the figure and quoting the parser", () => {
    const error = refusal(() => parseModelPrices(IMAGE, { per_image: { "2K": "abc" } }));
    assert.equal(error.reason, "invalid_price");
    assert.deepEqual(error.facts, { field: "per_image.2K" });
    assert.match(error.message, /^per_image\.2K: invalid amount "abc": expected a decimal number/);
  });

  it("when a price is negative, then it is refused; zero is a price", () => {
    const error = refusal(() => parseModelPrices(TEXT, { output_per_million_tokens: "-0.5" }));
    assert.equal(error.reason, "invalid_price");
    assert.equal(error.message, "output_per_million_tokens: a price cannot be negative");
    assert.deepEqual(error.facts, { field: "output_per_million_tokens" });
    assert.equal(parseModelPrices(TEXT, { input_per_million_tokens: "0" }).inputPerMillion, 0n);
    assert.equal(refusal(() => parseModelPrices(IMAGE, { per_image: { "1K": "-1" } })).facts.field, "per_image.1K");
  });

  it("when a per-1M price has exactly six significant decimals, then it is accepted; seven, then refused", () => {
    assert.equal(parseModelPrices(TEXT, { input_per_million_tokens: "0.000001" }).inputPerMillion, 1_000_000n);
    // Trailing zeros are not significant.
    assert.equal(parseModelPrices(TEXT, { input_per_million_tokens: "0.10000000" }).inputPerMillion, $("0.1"));
    assert.equal(parseModelPrices(TEXT, { input_per_million_tokens: "5" }).inputPerMillion, $("5"));
    for (const field of ["input_per_million_tokens", "output_per_million_tokens", "video_output_per_million_tokens"] as const) {
      const error = refusal(() => parseModelPrices(OMNI, { [field]: "0.0000015" }));
      assert.equal(error.reason, "invalid_price");
      assert.equal(error.message, `${field}: at most 6 decimals`);
      assert.deepEqual(error.facts, { field });
    }
  });

  it("when a per-image or per-second price has twelve decimals, then it is accepted", () => {
    assert.equal(parseModelPrices(IMAGE, { per_image: { "1K": "0.123456789012" } }).perImage?.["1K"], 123_456_789_012n);
    assert.equal(parseModelPrices(VIDEO, { per_second: { "720p": "0.000000000001" } }).perSecond?.["720p"], 1n);
  });

  it("when an update names one figure, then every other figure keeps its previous value", () => {
    const previous = parseModelPrices(OMNI, {
      input_per_million_tokens: "0.50", output_per_million_tokens: "2.00", video_output_per_million_tokens: "12.00",
    });
    const next = parseModelPrices(OMNI, { video_output_per_million_tokens: "13.00", input_per_million_tokens: "" }, previous);
    assert.equal(next.inputPerMillion, $("0.50"));
    assert.equal(next.outputPerMillion, $("2.00"));
    assert.equal(next.videoOutputPerMillion, $("13.00"));
    assert.equal(parseModelPrices(OMNI, { output_per_million_tokens: "" }).outputPerMillion, undefined);
  });

  it("when an update prices one resolution, then the other resolutions keep their prices", () => {
    const previous = parseModelPrices(IMAGE, { per_image: { "1K": "0.10", "2K": "0.20" } });
    const next = parseModelPrices(IMAGE, { per_image: { "1K": "0.15" } }, previous);
    assert.deepEqual(next.perImage, { "1K": $("0.15"), "2K": $("0.20") });
    assert.deepEqual(parseModelPrices(IMAGE, { per_image: {} }, previous).perImage, previous.perImage);
    assert.deepEqual(parseModelPrices(IMAGE, {}, previous).perImage, previous.perImage);
    const videoBefore = parseModelPrices(VIDEO, { per_second: { "720p": "0.40", "4k": "0.60" } });
    assert.deepEqual(parseModelPrices(VIDEO, { per_second: { "4k": "0.70" } }, videoBefore).perSecond, { "720p": $("0.40"), "4k": $("0.70") });
  });

  it("when no keyed price is given and none was before, then there is none, even for an empty set", () => {
    assert.equal(parseModelPrices(IMAGE, { per_image: {} }).perImage, undefined);
    assert.equal(parseModelPrices(VIDEO, { per_second: {} }).perSecond, undefined);
  });

  it("when prices are shown, then every figure is a decimal string and missing ones are empty", () => {
    const prices: ModelPrices = { perImage: { "1K": $("0.134") }, inputPerMillion: $("0.3"), videoOutputPerMillion: 0n };
    assert.deepEqual(formatModelPrices(prices), {
      per_image: { "1K": "0.134" }, per_second: {}, input_per_million_tokens: "0.30", output_per_million_tokens: "",
      video_output_per_million_tokens: "0.00",
    });
    assert.deepEqual(formatModelPrices({ perSecond: { "4k": $("0.6") }, outputPerMillion: $("2.5") }), {
      per_image: {}, per_second: { "4k": "0.60" }, input_per_million_tokens: "", output_per_million_tokens: "2.50",
      video_output_per_million_tokens: "",
    });
    assert.deepEqual(formatModelPrices(undefined), {
      per_image: {}, per_second: {}, input_per_million_tokens: "", output_per_million_tokens: "", video_output_per_million_tokens: "",
    });
  });

  it("when a price table names its models, then each is parsed; an unknown model or a -preview alias is refused", () => {
    const table = parsePriceTable({ "aimodel-3-pro-image": { per_image: { "1K": "0.1" } }, "aimodel-3.5-flash": { input_per_million_tokens: "1" } });
    assert.deepEqual([...table.keys()], ["aimodel-3-pro-image", "aimodel-3.5-flash"]);
    assert.equal(table.get("aimodel-3.5-flash")?.inputPerMillion, $("1"));
    assert.throws(() => parsePriceTable({ "aimodel-nope": {} }), { message: 'price table names an unknown model "aimodel-nope"' });
    assert.throws(() => parsePriceTable({ "aimodel-3-pro-image-preview": {} }), { message: 'price table names an unknown model "aimodel-3-pro-image-preview"' });
    assert.equal(parsePriceTable({}).size, 0);
  });
});

describe("quotes", () => {
  const omni: ModelPrices = { inputPerMillion: $("0.50"), outputPerMillion: $("2.00"), videoOutputPerMillion: $("12.00") };
  const text: ModelPrices = { inputPerMillion: $("0.30"), outputPerMillion: $("2.50") };

  it("when a price is missing, then the model is unavailable rather than free, and the message says which price", () => {
    const cases: [() => unknown, string][] = [
      [() => imagePrice("img", undefined, "2K"), "no 2K image price is configured for img"],
      [() => imagePrice("img", text, "1K"), "no 1K image price is configured for img"],
      [() => imagePrice("img", { perImage: { "1K": 1n } }, "4K"), "no 4K image price is configured for img"],
      [() => videoPrice("vid", undefined, "720p", 4), "no 720p per-second price is configured for vid"],
      [() => videoPrice("vid", text, "4k", 8), "no 4k per-second price is configured for vid"],
      [() => tokenCost("txt", undefined, { promptTokens: 1, textOutputTokens: 1, videoOutputTokens: 0 }), "no token price is configured for txt"],
      [() => tokenCost("txt", { inputPerMillion: 1n }, { promptTokens: 1, textOutputTokens: 1, videoOutputTokens: 0 }), "no token price is configured for txt"],
      [() => tokenCost("txt", { outputPerMillion: 1n }, { promptTokens: 1, textOutputTokens: 1, videoOutputTokens: 0 }), "no token price is configured for txt"],
      [() => tokenEstimate("txt", undefined, 1, 1), "no token price is configured for txt"],
      [() => tokenEstimate("txt", { inputPerMillion: 1n }, 1, 1), "no token price is configured for txt"],
      [() => tokenEstimate("txt", { outputPerMillion: 1n }, 1, 1), "no token price is configured for txt"],
    ];
    for (const [work, message] of cases) {
      const error = refusal(work);
      assert.equal(error.category, "unavailable");
      assert.equal(error.reason, "price_not_configured");
      assert.equal(error.message, message);
    }
  });

  it("when a price of zero is configured, then it is a price, not a missing one", () => {
    assert.equal(imagePrice("img", { perImage: { "1K": 0n } }, "1K"), 0n);
    assert.equal(videoPrice("vid", { perSecond: { "720p": 0n } }, "720p", 8), 0n);
    assert.equal(tokenCost("txt", { inputPerMillion: 0n, outputPerMillion: 0n }, { promptTokens: 9, textOutputTokens: 9, videoOutputTokens: 9 }), 0n);
  });

  it("when video is priced, then it is the per-second price of its resolution times its seconds", () => {
    assert.equal(videoPrice("vid", { perSecond: { "720p": $("0.40"), "4k": $("0.60") } }, "720p", 7), $("2.80"));
  });

  it("when a text model reports video output tokens, then they are billed at its output price", () => {
    const cost = tokenCost("txt", text, { promptTokens: 1_000_000, textOutputTokens: 2_000_000, videoOutputTokens: 4_000_000 });
    assert.equal(cost, $("0.30") + $("5.00") + $("10.00"));
  });

  it("when the multimodal model is charged, then prompt, text output and video output each have their price", () => {
    const cost = tokenCost("omni", omni, { promptTokens: 2_000_000, textOutputTokens: 3_000_000, videoOutputTokens: 1_000_000 });
    assert.equal(cost, $("1.00") + $("6.00") + $("12.00"));
  });

  it("when a reservation is estimated, then the prompt is at the input price and the answer at the dearer output price", () => {
    assert.equal(tokenEstimate("omni", omni, 2_000_000, 1_000_000), $("1.00") + $("12.00"));
    // Video output cheaper than text output: text's price bounds the answer.
    assert.equal(tokenEstimate("omni", { ...omni, videoOutputPerMillion: $("1.00") }, 2_000_000, 1_000_000), $("1.00") + $("2.00"));
    assert.equal(tokenEstimate("txt", text, 1_000_000, 2_000_000), $("0.30") + $("5.00"));
  });
});

describe("quoting a validated job", () => {
  const spec = (model: ModelSpec, rest: Partial<GenerationSpec> = {}): GenerationSpec => ({
    model, prompt: "abcd", inputImageUrls: [], inlineImages: [], timeoutSeconds: 60, ...rest,
  });
  const staged = (head: Uint8Array) => ({ mimeType: "image/png", ref: "r", decodedBytes: 10, digest: "d", head });
  const inline = (bytes: Uint8Array) => {
    const base64 = Buffer.from(bytes).toString("base64");
    return { mimeType: "image/png", base64, decodedBytes: bytes.length };
  };

  it("when an image job is quoted, then it costs its resolution's price", () => {
    assert.equal(quoteGeneration(spec(IMAGE, { resolution: "2K" }), { perImage: { "1K": $("0.1"), "2K": $("0.2") } }), $("0.2"));
  });

  it("when a video job is quoted, then it costs its seconds at its resolution's price", () => {
    assert.equal(quoteGeneration(spec(VIDEO, { resolution: "720p", durationSeconds: 6 }), { perSecond: { "720p": $("0.5") } }), $("3.00"));
  });

  it("when a text or multimodal job is quoted, then its prompt and largest answer are reserved", () => {
    const prices = { inputPerMillion: $("1.00"), outputPerMillion: $("1000.00") };
    // "abcd" is 1 token; the model's maximum answer is 8192 tokens.
    assert.equal(quoteGeneration(spec(TEXT), prices), perMillion($("1.00"), 1) + perMillion($("1000.00"), 8192));
    assert.equal(quoteGeneration(spec(OMNI), prices), perMillion($("1.00"), 1) + perMillion($("1000.00"), 8192));
  });

  it("when a job's input images have no known size, then each counts as the largest image (9288 tokens)", () => {
    assert.equal(jobPromptTokenBound(spec(TEXT, { inputImageUrls: ["https://a.example/1.png", "https://a.example/2.png"] })), 1 + 2 * 9288);
    assert.equal(jobPromptTokenBound(spec(TEXT, { inlineImages: [staged(new Uint8Array(0))] })), 1 + 9288);
    assert.equal(jobPromptTokenBound(spec(TEXT, { inlineImages: [inline(Uint8Array.from([1, 2, 3]))] })), 1 + 9288);
  });

  it("when a job's inline images show their size, then each counts by its tiles, at least the per-image maximum", () => {
    // 2304 × 2304 is 3 × 3 tiles of 258 tokens: 2322, more than the 2240 floor.
    assert.equal(jobPromptTokenBound(spec(TEXT, { inlineImages: [inline(png(2304, 2304))] })), 1 + 2322);
    assert.equal(jobPromptTokenBound(spec(TEXT, { inlineImages: [staged(png(2304, 2304)), inline(png(10, 10))] })), 1 + 2322 + 2240);
  });
});

describe("settlement bound", () => {
  const account = { balance: 100n, reserved: 30n };

  it("when the charge asked is within the hold plus what is available, then all of it is charged", () => {
    // room = hold 10 + balance 100 − reserved 30 = 80
    assert.deepEqual(boundedCharge(50n, 10n, account), { charged: 50n, shortfall: 0n });
    assert.deepEqual(boundedCharge(80n, 10n, account), { charged: 80n, shortfall: 0n });
  });

  it("when the charge asked passes that room by one, then the room is charged and one is the shortfall", () => {
    assert.deepEqual(boundedCharge(81n, 10n, account), { charged: 80n, shortfall: 1n });
  });

  it("when there is no room at all, then nothing is charged and all of it is the shortfall", () => {
    assert.deepEqual(boundedCharge(5n, 0n, { balance: 10n, reserved: 10n }), { charged: 0n, shortfall: 5n });
    assert.deepEqual(boundedCharge(5n, 0n, { balance: 10n, reserved: 25n }), { charged: 0n, shortfall: 5n });
  });

  it("when a reservation id is counted by prefix, then an excepted prefix is not counted", () => {
    assert.equal(countsAsOpenHold("job:1", "job:"), true);
    assert.equal(countsAsOpenHold("text:1", "job:"), false);
    assert.equal(countsAsOpenHold("job:text:1", "job:", "job:text:"), false);
    assert.equal(countsAsOpenHold("job:img:1", "job:", "job:text:"), true);
    assert.equal(countsAsOpenHold("other", "job:", "job:text:"), false);
    // No exception given: every id with the prefix counts, whatever it spells.
    assert.equal(countsAsOpenHold("undefined:1", ""), true);
  });
});
