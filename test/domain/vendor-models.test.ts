// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { findModel } from "../../src/domain/catalog/models.js";
import {
  describeTextModel, displayNameOf, findTextModel, inputTokenLimit, LISTED_MODELS, textModelPage, TEXT_MODELS, versionOf,
} from "../../src/domain/catalog/text-models.js";
import { DomainError } from "../../src/domain/errors/domain-error.js";
import { promptCount } from "../../src/domain/text/prompt-count.js";
import { DEFAULT_LIMITS, type ValidationLimits } from "../../src/domain/validation/limits.js";

function refusal(work: () => unknown): DomainError {
  try {
    work();
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    return error;
  }
  return assert.fail("expected a DomainError");
}

const ids = (page: { models: readonly { id: string }[] }) => page.models.map((m) => m.id);

describe("the vendor's Model resource of the text models", () => {
  it("when the catalog is read, then the text models are the text and multimodal ones, in catalog order", () => {
    assert.deepEqual(TEXT_MODELS.map((m) => m.id), [
      "aimodel-3-flash-preview", "aimodel-3.1-flash-lite", "aimodel-3.1-pro-preview", "aimodel-3.5-flash",
      "aimodel-3.5-flash-lite", "aimodel-3.6-flash", "aimodel-3.7-flash", "aimodel-omni-1.1-flash",
    ]);
  });

  it("when a model is described, then its name is models/{id} and its limits are the prompt limit in tokens and its output bound", () => {
    const limits: ValidationLimits = { ...DEFAULT_LIMITS, maxPromptBytes: { image: 1, video: 2, text: 4099 } };
    const flash = describeTextModel(findModel("aimodel-3.5-flash")!, limits);
    assert.deepEqual(flash, {
      name: "models/aimodel-3.5-flash",
      baseModelId: "aimodel-3.5-flash",
      version: "3.5",
      displayName: "AIModel 3.5 Flash",
      description: "Text generation; billed per 1M tokens: input and output.",
      inputTokenLimit: 1024,
      outputTokenLimit: 8192,
      supportedGenerationMethods: ["generateContent", "streamGenerateContent", "countTokens"],
    });
    assert.match(describeTextModel(findModel("aimodel-omni-1.1-flash")!, limits).description, /video output/);
    assert.equal(inputTokenLimit(DEFAULT_LIMITS), 262_144);
  });

  it("when the catalog is listed, then the image models follow the text models, and describe generateContent without countTokens", () => {
    assert.deepEqual(LISTED_MODELS.map((m) => m.id), [
      ...TEXT_MODELS.map((m) => m.id),
      "aimodel-2.5-flash-image", "aimodel-3.1-flash-image", "aimodel-3-pro-image", "aimodel-3.1-flash-lite-image", "aimodel-nbx-2.1",
    ]);
    const limits: ValidationLimits = { ...DEFAULT_LIMITS, maxPromptBytes: { image: 4096, video: 2, text: 4099 } };
    assert.deepEqual(describeTextModel(findModel("aimodel-3-pro-image")!, limits), {
      name: "models/aimodel-3-pro-image",
      baseModelId: "aimodel-3-pro-image",
      version: "3",
      displayName: "AIModel 3 Pro Image",
      description: "Image generation through generateContent (responseModalities IMAGE); billed per image by resolution (1K, 2K, 4K).",
      inputTokenLimit: 1024,
      outputTokenLimit: 0,
      supportedGenerationMethods: ["generateContent", "streamGenerateContent"],
    });
  });

  it("when ids are named, then display names capitalise each word and versions are the first dotted number", () => {
    assert.equal(displayNameOf("aimodel-3.1-flash-lite"), "AIModel 3.1 Flash Lite");
    assert.equal(displayNameOf("aimodel-omni-1.1-flash"), "AIModel Omni 1.1 Flash");
    assert.equal(versionOf("aimodel-omni-1.1-flash"), "1.1");
    assert.equal(versionOf("aimodel-3-flash-preview"), "3");
    assert.equal(versionOf("no-digits"), "");
  });

  it("when a model is looked up by models/{id} or by id, then a text or image model is found and anything else is NOT_FOUND unknown_model", () => {
    assert.equal(findTextModel("models/aimodel-3.7-flash").id, "aimodel-3.7-flash");
    assert.equal(findTextModel("aimodel-3.7-flash").id, "aimodel-3.7-flash");
    assert.equal(findTextModel("models/aimodel-3-pro-image").id, "aimodel-3-pro-image");
    assert.equal(findTextModel("aimodel-3-pro-image-preview").id, "aimodel-3-pro-image", "an image model's alias names it");
    for (const name of ["videomodel-3.1-generate-001", "models/aimodel-3.7-flash-preview", "models/", ""]) {
      const error = refusal(() => findTextModel(name));
      assert.deepEqual([error.category, error.reason], ["not_found", "unknown_model"], name);
    }
  });
});

describe("pages of the listed models (the vendor's pageSize and pageToken rules)", () => {
  it("when pageSize is 0, then the default of 50 gives every model and no next token", () => {
    const page = textModelPage(0, "");
    assert.deepEqual(ids(page), LISTED_MODELS.map((m) => m.id));
    assert.equal(page.nextPageToken, "");
  });

  it("when pages of 3 are followed by their tokens, then 3, 3, 3, 3 and 1 models come, each once, the last without a token", () => {
    const seen: string[][] = [];
    let token = "";
    do {
      const page = textModelPage(3, token);
      seen.push(ids(page));
      token = page.nextPageToken;
    } while (token);
    assert.deepEqual(seen.map((p) => p.length), [3, 3, 3, 3, 1]);
    assert.deepEqual(seen.flat(), LISTED_MODELS.map((m) => m.id));
  });

  it("when pageSize equals what is left, then that page is the last one", () => {
    const first = textModelPage(LISTED_MODELS.length - 1, "");
    assert.notEqual(first.nextPageToken, "");
    const last = textModelPage(1, first.nextPageToken);
    assert.equal(last.models.length, 1);
    assert.equal(last.nextPageToken, "");
    assert.equal(textModelPage(LISTED_MODELS.length, "").nextPageToken, "");
  });

  it("when pageSize is above 1000, then 1000 is taken; below 0 or not an integer, then INVALID_ARGUMENT invalid_page_size", () => {
    assert.equal(textModelPage(1_000_000, "").models.length, LISTED_MODELS.length);
    for (const size of [-1, 1.5, Number.NaN]) {
      const error = refusal(() => textModelPage(size, ""));
      assert.deepEqual([error.category, error.reason], ["bad_request", "invalid_page_size"], String(size));
    }
  });

  it("when the token is not one a page gave, then INVALID_ARGUMENT invalid_page_token", () => {
    const given = textModelPage(2, "").nextPageToken;
    for (const token of ["x", given.slice(1), Buffer.from("after:videomodel-3.1-generate-001").toString("base64url")]) {
      const error = refusal(() => textModelPage(2, token));
      assert.deepEqual([error.category, error.reason], ["bad_request", "invalid_page_token"], token);
    }
  });
});

describe("countTokens of a validated text request", () => {
  it("when the request is only text, then the total is its tokens and the one detail is TEXT", () => {
    assert.deepEqual(promptCount({ promptTokens: 7, media: [] }), { totalTokens: 7, details: [{ modality: "TEXT", tokenCount: 7 }] });
  });

  it("when media come inline, then each counts by its rule under IMAGE, AUDIO or VIDEO, and text documents under TEXT", () => {
    const count = promptCount({
      promptTokens: 5,
      media: [
        { mimeType: "video/mp4", bytes: 80 },
        { mimeType: "image/png", bytes: 10 },
        { mimeType: "audio/mpeg", bytes: 16 },
        { mimeType: " Video/WebM ", bytes: 8 },
        { mimeType: "text/plain", bytes: 3 },
        { mimeType: "image/jpeg", bytes: 10 },
      ],
    });
    // An image whose size is unknown: 4096×4096, 36 tiles of 258; audio and video one token per 8 bytes; text one per byte.
    assert.deepEqual(count.details, [
      { modality: "TEXT", tokenCount: 5 + 3 },
      { modality: "IMAGE", tokenCount: 2 * 36 * 258 },
      { modality: "AUDIO", tokenCount: 2 },
      { modality: "VIDEO", tokenCount: 10 + 1 },
    ]);
    assert.equal(count.totalTokens, 8 + 2 * 36 * 258 + 2 + 11);
  });
});
