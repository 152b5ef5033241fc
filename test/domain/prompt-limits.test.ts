// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { findModel } from "../../src/domain/catalog/models.js";
import { DomainError } from "../../src/domain/errors/domain-error.js";
import { checkGenerationSize, validateGenerationRequest } from "../../src/domain/validation/generation-request.js";
import { DEFAULT_LIMITS, KIB, MIB, type ValidationLimits } from "../../src/domain/validation/limits.js";
import { checkPromptBytes, checkTextPromptBytes, promptByteLimit, promptLimitKind } from "../../src/domain/validation/prompt-size.js";
import { validateTextRequest } from "../../src/domain/validation/text-request.js";
import { checkTextLength, MAX_NAME_CHARACTERS } from "../../src/domain/validation/text-fields.js";
import { checkVideoInteractionSize, validateVideoInteraction } from "../../src/domain/validation/video-interaction.js";

const IMAGE = findModel("aimodel-3-pro-image")!;
const VIDEO = findModel("videomodel-3.1-generate-001")!;
const TEXT = findModel("aimodel-3.5-flash")!;
const OMNI = findModel("aimodel-omni-1.1-flash")!;

/** Distinct limits per kind, so a rule that reads the wrong one is caught. */
const LIMITS: ValidationLimits = { ...DEFAULT_LIMITS, maxPromptBytes: { image: 10, video: 7, text: 13 } };

function refusal(work: () => unknown): DomainError | undefined {
  try {
    work();
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    return error;
  }
  return undefined;
}

function assertTooLong(work: () => unknown, facts: Record<string, string | number>, message: RegExp) {
  const error = refusal(work);
  assert.ok(error, "expected a refusal");
  assert.equal(error.category, "invalid");
  assert.equal(error.reason, "prompt_too_long");
  assert.deepEqual(error.facts, facts);
  assert.match(error.message, message);
}

describe("prompt limits", () => {
  it("when nothing is configured, then the limits are 32 KiB for image, 16 KiB for video and 1 MiB for text prompts", () => {
    assert.deepEqual(DEFAULT_LIMITS.maxPromptBytes, { image: 32 * KIB, video: 16 * KIB, text: 1 * MIB });
  });

  it("when a model's kind decides the limit, then image, video and text have their own and the multimodal model has text's", () => {
    assert.deepEqual([IMAGE, VIDEO, TEXT, OMNI].map(promptLimitKind), ["image", "video", "text", "text"]);
    assert.deepEqual([IMAGE, VIDEO, TEXT, OMNI].map((m) => promptByteLimit(m, LIMITS)), [10, 7, 13, 13]);
  });

  for (const [model, limit, kind] of [[IMAGE, 10, "image"], [VIDEO, 7, "video"], [TEXT, 13, "text"], [OMNI, 13, "text"]] as const) {
    it(`when a ${model.id} prompt has exactly ${limit} bytes, then it is accepted; one byte more, then prompt_too_long`, () => {
      assert.equal(refusal(() => checkPromptBytes("a".repeat(limit), model, LIMITS)), undefined);
      assertTooLong(() => checkPromptBytes("a".repeat(limit + 1), model, LIMITS), { field: "prompt", limit, kind },
        new RegExp(`^prompt is longer than ${limit} bytes of UTF-8, the limit for ${kind} models$`));
    });
  }

  it("when a prompt has fewer characters than the limit but more UTF-8 bytes, then the bytes count", () => {
    // "é" is 2 bytes: 5 of them are 10 bytes (the image limit), then one ASCII character more is 11.
    assert.equal(refusal(() => checkPromptBytes("é".repeat(5), IMAGE, LIMITS)), undefined);
    assertTooLong(() => checkPromptBytes(`${"é".repeat(5)}a`, IMAGE, LIMITS), { field: "prompt", limit: 10, kind: "image" }, /10 bytes/);
    // A 4-byte character is two UTF-16 units: 2 of them plus 2 ASCII is 10 bytes in 6 units.
    assert.equal(refusal(() => checkPromptBytes("😀😀ab", IMAGE, LIMITS)), undefined);
    assert.ok(refusal(() => checkPromptBytes("😀😀abc", IMAGE, LIMITS)));
  });

  it("when a prompt holds null bytes, then they count as received (before they are stripped)", () => {
    assert.equal(refusal(() => checkPromptBytes("\u0000".repeat(10), IMAGE, LIMITS)), undefined);
    assert.ok(refusal(() => checkPromptBytes(`${"\u0000".repeat(10)}a`, IMAGE, LIMITS)));
  });

  it("when the field is named, then the refusal names it", () => {
    assertTooLong(() => checkPromptBytes("a".repeat(8), VIDEO, LIMITS, "instances[0].prompt"),
      { field: "instances[0].prompt", limit: 7, kind: "video" }, /^instances\[0\]\.prompt is longer than 7 bytes/);
  });

  it("when a job request's prompt is over its kind's limit, then validation refuses it before any other rule", () => {
    const request = (model: string, prompt: string) => ({ model, prompt, inputImagesUrls: [], inputImagesBase64: [], timeout: 1 });
    // timeout 1 breaks another rule: the prompt limit is reported first.
    assertTooLong(() => validateGenerationRequest(request("aimodel-3-pro-image", "a".repeat(11)), LIMITS),
      { field: "prompt", limit: 10, kind: "image" }, /prompt/);
    assert.equal(refusal(() => validateGenerationRequest(request("aimodel-3-pro-image", "a".repeat(10)), LIMITS))?.reason, "invalid_timeout");
    assert.equal(refusal(() => checkGenerationSize(request("videomodel-3.1-generate-001", "a".repeat(8)), LIMITS))?.reason, "prompt_too_long");
    assert.equal(checkGenerationSize(request("aimodel-omni-1.1-flash", "a".repeat(13)), LIMITS), OMNI);
    assert.equal(refusal(() => checkGenerationSize(request("aimodel-nope", "a"), LIMITS))?.reason, "unknown_model");
  });

  it("when a video interaction's prompt is over the video limit, then it is refused and its field named", () => {
    const interaction = (prompts: string[]) => ({ model: "videomodel-3.1-generate-001", instances: prompts.map((prompt) => ({ prompt })) });
    assert.equal(validateVideoInteraction(interaction(["a".repeat(7)]), LIMITS).prompt, "a".repeat(7));
    assertTooLong(() => validateVideoInteraction(interaction(["a".repeat(8)]), LIMITS),
      { field: "instances[0].prompt", limit: 7, kind: "video" }, /^instances\[0\]\.prompt/);
    assertTooLong(() => checkVideoInteractionSize(interaction(["a", "a".repeat(8)]), LIMITS),
      { field: "instances[1].prompt", limit: 7, kind: "video" }, /^instances\[1\]\.prompt/);
  });

  it("when the text API's parts and system instruction together pass the limit, then the request is refused; at the limit, accepted", () => {
    const request = (parts: string[], system: string[] = []) => ({
      model: "aimodel-3.5-flash",
      contents: [{ role: "user", parts: parts.slice(0, 1).map((text) => ({ text })) }, { role: "user", parts: parts.slice(1).map((text) => ({ text })) }],
      systemInstruction: { parts: system.map((text) => ({ text })) },
    });
    // 13 bytes in all: 5 + 4 in contents, 4 in the system instruction.
    assert.equal(refusal(() => checkTextPromptBytes(request(["aaaaa", "bbbb"], ["cccc"]), TEXT, LIMITS)), undefined);
    assertTooLong(() => validateTextRequest(request(["aaaaa", "bbbb"], ["ccccc"]), LIMITS),
      { field: "contents", limit: 13, kind: "text" }, /^the text of contents and systemInstruction is longer than 13 bytes of UTF-8, the limit for text models$/);
    assertTooLong(() => validateTextRequest(request(["aaaaaa", "bbbb", "cccc"]), LIMITS), { field: "contents", limit: 13, kind: "text" }, /13/);
    // Multi-byte text counts its bytes: 6 × "é" is 12 bytes, one more byte passes the limit.
    assert.equal(refusal(() => checkTextPromptBytes(request(["éééééé", "a"]), TEXT, LIMITS)), undefined);
    assert.ok(refusal(() => checkTextPromptBytes(request(["éééééé", "ab"]), TEXT, LIMITS)));
    // One part alone longer (in UTF-16 units) than the limit.
    assert.ok(refusal(() => checkTextPromptBytes(request(["a".repeat(14)]), TEXT, LIMITS)));
    // Parts without text (inline data) count nothing.
    assert.equal(refusal(() => checkTextPromptBytes({ contents: [{ parts: [{}, { text: "a".repeat(13) }, {}] }] }, TEXT, LIMITS)), undefined);
  });

  it("when the multimodal model is asked through the text API, then its prompt has the text limit", () => {
    const request = (text: string) => ({ model: "aimodel-omni-1.1-flash", contents: [{ role: "user", parts: [{ text }] }] });
    assert.equal(refusal(() => checkTextPromptBytes(request("a".repeat(13)), OMNI, LIMITS)), undefined);
    assert.equal(refusal(() => validateTextRequest(request("a".repeat(14)), LIMITS))?.facts.kind, "text");
  });
});

describe("free-text field bounds", () => {
  it("when a value has more characters than its bound, then it is 400 field_too_long naming the field; code points count, not UTF-16 units", () => {
    assert.doesNotThrow(() => checkTextLength("name", "🚀".repeat(MAX_NAME_CHARACTERS), MAX_NAME_CHARACTERS));
    assert.throws(() => checkTextLength("name", "n".repeat(MAX_NAME_CHARACTERS + 1), MAX_NAME_CHARACTERS), (error: unknown) =>
      error instanceof DomainError && error.category === "bad_request" && error.reason === "field_too_long" && error.facts.field === "name" && error.facts.limit === MAX_NAME_CHARACTERS,
    );
  });
});
