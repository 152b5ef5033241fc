// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { findModel } from "../../src/domain/catalog/models.js";
import { formatMoney, parseMoney } from "../../src/domain/money.js";
import { parseModelPrices, parsePriceTable } from "../../src/domain/pricing/price-table.js";
import { imagePrice, tokenCost, tokenEstimate, videoPrice } from "../../src/domain/pricing/quotes.js";
import { chargeFor, quoteGeneration } from "../../src/domain/pricing/quote-generation.js";
import { validateGenerationRequest } from "../../src/domain/validation/generation-request.js";
import { DEFAULT_LIMITS } from "../../src/domain/validation/limits.js";

const table = parsePriceTable({
  "aimodel-3-pro-image": { per_image: { "1K": "0.134", "4K": "0.24" } },
  "videomodel-3.1-generate-001": { per_second: { "720p": "0.40", "4k": "0.60" } },
  "aimodel-3.5-flash": { input_per_million_tokens: "0.30", output_per_million_tokens: "2.50" },
  "aimodel-omni-1.1-flash": {
    input_per_million_tokens: "0.50", output_per_million_tokens: "2.00", video_output_per_million_tokens: "12.00",
  },
});

describe("pricing", () => {
  it("prices an image by model and resolution", () => {
    assert.equal(formatMoney(imagePrice("aimodel-3-pro-image", table.get("aimodel-3-pro-image"), "4K")), "0.24");
    assert.throws(() => imagePrice("aimodel-3-pro-image", table.get("aimodel-3-pro-image"), "2K"), /no 2K image price/);
  });

  it("prices video per second of its resolution", () => {
    assert.equal(formatMoney(videoPrice("v", table.get("videomodel-3.1-generate-001"), "4k", 8)), "4.80");
    assert.equal(formatMoney(videoPrice("v", table.get("videomodel-3.1-generate-001"), "720p", 5)), "2.00");
  });

  it("charges text per token at separate input and output prices", () => {
    const cost = tokenCost("t", table.get("aimodel-3.5-flash"), { promptTokens: 1000, textOutputTokens: 200, videoOutputTokens: 0 });
    assert.equal(formatMoney(cost), "0.0008"); // 1000 × 0.30/1M + 200 × 2.50/1M
  });

  it("bills the multimodal model's text and video output at their own prices", () => {
    const cost = tokenCost("o", table.get("aimodel-omni-1.1-flash"), { promptTokens: 100, textOutputTokens: 10, videoOutputTokens: 1000 });
    assert.equal(cost, parseMoney("0.00005") + parseMoney("0.00002") + parseMoney("0.012"));
  });

  it("reserves for a text request the prompt plus the largest answer at the dearest output price", () => {
    assert.equal(formatMoney(tokenEstimate("t", table.get("aimodel-3.5-flash"), 10, 8192)), "0.020483");
    assert.equal(tokenEstimate("o", table.get("aimodel-omni-1.1-flash"), 0, 1_000_000), parseMoney("12.00"));
  });

  it("quotes a validated job request", () => {
    const spec = validateGenerationRequest(
      { model: "videomodel-3.1-generate-001", prompt: "x", resolution: "4k", durationSeconds: 8, inputImagesUrls: [], inputImagesBase64: [] },
      DEFAULT_LIMITS,
    );
    assert.equal(formatMoney(quoteGeneration(spec, table.get("videomodel-3.1-generate-001"))), "4.80");
  });

  describe("when a finished job is charged", () => {
    const usage = { promptTokens: 1000, textOutputTokens: 200, videoOutputTokens: 0 };
    it("then an image is charged its resolution's price from the prices it was accepted under, whatever it used", () => {
      const job = { kind: "image" as const, model: "aimodel-3-pro-image", input: { prompt: "x", resolution: "4K", inputImageUrls: [], inputBlobKeys: [], prices: table.get("aimodel-3-pro-image") } };
      assert.equal(formatMoney(chargeFor(job, usage)), "0.24");
      assert.equal(formatMoney(chargeFor({ ...job, input: { ...job.input, resolution: "1K" } }, usage)), "0.134");
    });
    it("then a video is charged its resolution's price per second of its duration", () => {
      const input = { prompt: "x", resolution: "720p", durationSeconds: 5, inputImageUrls: [], inputBlobKeys: [], prices: table.get("videomodel-3.1-generate-001") };
      assert.equal(formatMoney(chargeFor({ kind: "video", model: "videomodel-3.1-generate-001", input }, usage)), "2.00");
      assert.equal(formatMoney(chargeFor({ kind: "video", model: "videomodel-3.1-generate-001", input: { ...input, durationSeconds: 8 } }, usage)), "3.20");
    });
    it("then text and the multimodal model are charged the tokens they used, at the job's prices, not today's", () => {
      const input = { prompt: "x", inputImageUrls: [], inputBlobKeys: [], prices: table.get("aimodel-3.5-flash") };
      assert.equal(formatMoney(chargeFor({ kind: "text", model: "aimodel-3.5-flash", input }, usage)), "0.0008");
      const omni = { prompt: "x", inputImageUrls: [], inputBlobKeys: [], prices: table.get("aimodel-omni-1.1-flash") };
      assert.equal(
        chargeFor({ kind: "multimodal_realtime", model: "aimodel-omni-1.1-flash", input: omni }, { promptTokens: 100, textOutputTokens: 10, videoOutputTokens: 1000 }),
        parseMoney("0.00005") + parseMoney("0.00002") + parseMoney("0.012"),
      );
    });
    it("then a job accepted without a price for what it made is refused, never charged nothing", () => {
      const input = { prompt: "x", resolution: "4K", inputImageUrls: [], inputBlobKeys: [] };
      assert.throws(() => chargeFor({ kind: "image", model: "m", input }, usage), /no 4K image price/);
      assert.throws(() => chargeFor({ kind: "text", model: "m", input }, usage), /no token price/);
    });
  });

  it("refuses per-1M prices with more than six decimals so that one token's price stays exact", () => {
    const model = findModel("aimodel-3.5-flash")!;
    assert.throws(() => parseModelPrices(model, { input_per_million_tokens: "0.0000001" }), /at most 6 decimals/);
    assert.throws(() => parseModelPrices(model, { input_per_million_tokens: "-1" }), /negative/);
  });

  it("keeps the fields an update leaves empty", () => {
    const model = findModel("aimodel-3.5-flash")!;
    const next = parseModelPrices(model, { output_per_million_tokens: "3.00" }, table.get("aimodel-3.5-flash"));
    assert.equal(next.inputPerMillion, parseMoney("0.30"));
    assert.equal(next.outputPerMillion, parseMoney("3.00"));
  });
});
