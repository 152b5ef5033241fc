import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DomainError } from "../../../src/domain/errors/domain-error.js";
import {
  isImageModelId, validateImageContentRequest, type ImageContentInput,
} from "../../../src/domain/validation/image-content-request.js";
import { DEFAULT_LIMITS } from "../../../src/domain/validation/limits.js";

const base: ImageContentInput = {
  model: "aimodel-3.1-flash-image",
  contents: [{ parts: [{ text: "a lighthouse" }] }],
  responseModalities: ["TEXT", "IMAGE"],
  fieldsSet: [],
};

const validate = (input: Partial<ImageContentInput>, limits = DEFAULT_LIMITS) => validateImageContentRequest({ ...base, ...input }, limits);

/** "category:reason:field" of a refusal, or "accepted". */
function outcome(input: Partial<ImageContentInput>, limits = DEFAULT_LIMITS): string {
  try {
    validate(input, limits);
    return "accepted";
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    return `${error.category}:${error.reason}:${error.facts.field ?? ""}`;
  }
}

describe("generateContent on an image model (issue 38): the image jobs' rules in the vendor's shape", () => {
  it("when a model id is an image model's (a -preview alias too), then it is recognised; text, video and unknown ids are not", () => {
    assert.equal(isImageModelId("aimodel-3-pro-image"), true);
    assert.equal(isImageModelId("aimodel-3-pro-image-preview"), true);
    assert.equal(isImageModelId("aimodel-nbx-2.1"), true);
    assert.equal(isImageModelId("aimodel-3.5-flash"), false);
    assert.equal(isImageModelId("videomodel-3.1-generate-001"), false);
    assert.equal(isImageModelId("nope"), false);
  });

  it("when imageConfig is left out, then the jobs' defaults hold: the model's default resolution, no ratio (auto), text wanted", () => {
    const spec = validate({});
    assert.deepEqual({ ...spec, model: spec.model.id }, {
      model: "aimodel-3.1-flash-image", prompt: "a lighthouse", aspectRatio: undefined, resolution: "1K", wantsText: true,
    });
    assert.equal(validate({ responseModalities: [] }).wantsText, true);
    assert.equal(validate({ responseModalities: ["IMAGE"] }).wantsText, false);
  });

  it("when imageSize and aspectRatio are given, then imageSize maps to the resolution the price is keyed by (any case) and auto to no ratio", () => {
    assert.deepEqual([validate({ imageSize: "2k", aspectRatio: "16:9" }).resolution, validate({ imageSize: "2k", aspectRatio: "16:9" }).aspectRatio],
      ["2K", "16:9"]);
    assert.equal(validate({ aspectRatio: "auto" }).aspectRatio, undefined);
    // The fast model ignores the size, as its jobs do: always 1K.
    assert.equal(validate({ model: "aimodel-2.5-flash-image", imageSize: "4K" }).resolution, "1K");
  });

  it("when the ratio or the size is not the model's, or the newer models miss one, then it is refused naming the vendor's field", () => {
    assert.equal(outcome({ model: "aimodel-2.5-flash-image", aspectRatio: "1:4" }),
      "invalid:unsupported_aspect_ratio:generationConfig.imageConfig.aspectRatio");
    assert.equal(outcome({ model: "aimodel-3.1-flash-lite-image", aspectRatio: "1:1", imageSize: "2K" }),
      "invalid:unsupported_resolution:generationConfig.imageConfig.imageSize");
    assert.equal(outcome({ model: "aimodel-nbx-2.1", imageSize: "1K" }), "invalid:missing_aspect_ratio:generationConfig.imageConfig.aspectRatio");
    assert.equal(outcome({ model: "aimodel-nbx-2.1", aspectRatio: "1:1" }), "invalid:missing_resolution:generationConfig.imageConfig.imageSize");
    assert.equal(outcome({ model: "aimodel-nbx-2.1", aspectRatio: "1:1", imageSize: "4K" }), "accepted");
  });

  it("when the modalities leave out IMAGE or name another, then it is refused; TEXT and IMAGE in any case are accepted", () => {
    assert.equal(outcome({ responseModalities: ["TEXT"] }), "bad_request:unsupported_field:generationConfig.responseModalities");
    assert.equal(outcome({ responseModalities: ["IMAGE", "AUDIO"] }), "bad_request:unsupported_field:generationConfig.responseModalities");
    assert.equal(outcome({ responseModalities: ["image", "text"] }), "accepted");
  });

  it("when a field an image answer cannot honour is set, then it is refused by its name", () => {
    for (const field of ["tools", "toolConfig", "safetySettings", "cachedContent", "generationConfig.responseSchema"]) {
      assert.equal(outcome({ fieldsSet: [field] }), `bad_request:unsupported_field:${field}`);
    }
    assert.equal(outcome({ contents: [{ parts: [{ text: "x" }, { other: "functionCall" }] }] }), "bad_request:unsupported_field:contents");
    assert.equal(outcome({ candidateCount: 2 }), "invalid:invalid_candidate_count:generationConfig.candidateCount");
  });

  it("when the contents hold no text, or more than the image prompt limit, then it is refused", () => {
    assert.equal(outcome({ contents: [] }), "invalid:invalid_contents:contents");
    assert.equal(outcome({ contents: [{ parts: [{ inlineData: { mimeType: "image/png", bytes: 10 } }] }] }), "invalid:invalid_prompt:contents");
    const limit = DEFAULT_LIMITS.maxPromptBytes.image;
    assert.equal(outcome({ contents: [{ parts: [{ text: "a".repeat(limit) }] }] }), "accepted");
    assert.equal(outcome({ contents: [{ parts: [{ text: "a".repeat(limit + 1) }] }] }), "invalid:prompt_too_long:contents");
  });

  it("when the system instruction and several turns carry text, then the prompt is all of it in order", () => {
    const spec = validate({ systemInstruction: { parts: [{ text: "style: ink" }] }, contents: [{ parts: [{ text: "a cat" }] }, { parts: [{ text: "bigger" }] }] });
    assert.equal(spec.prompt, "style: ink\na cat\nbigger");
  });

  it("when input images are sent, then the jobs' limits hold: images only, at most the route's count, at most maxInputBytes in all", () => {
    const image = (bytes: number, mimeType = "image/png") => ({ inlineData: { mimeType, bytes } });
    const withImages = (...parts: ReturnType<typeof image>[]) => ({ contents: [{ parts: [{ text: "edit" }, ...parts] }] });
    const limits = { ...DEFAULT_LIMITS, maxInputImages: 2, maxInputBytes: 1000 };
    assert.equal(outcome(withImages(image(10), image(10)), limits), "accepted");
    assert.equal(outcome(withImages(image(10), image(10), image(10)), limits), "invalid:too_many_input_images:contents");
    assert.equal(outcome(withImages(image(600), image(401)), limits), "invalid:input_too_large:");
    assert.equal(outcome(withImages(image(500), image(500)), limits), "accepted");
    assert.equal(outcome(withImages(image(10, "audio/wav")), limits), "bad_request:unsupported_media_type:contents");
  });

  it("when the model is not an image model, then these rules refuse it (the text path serves it)", () => {
    assert.equal(outcome({ model: "aimodel-3.5-flash" }), "invalid:unsupported_model:model");
  });
});
