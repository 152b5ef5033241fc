// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { isModelGranted } from "../../src/domain/accounts/grants.js";
import { findModel } from "../../src/domain/catalog/models.js";
import { imagePixelSize, videoFrameSize } from "../../src/domain/catalog/output-size.js";
import { DomainError } from "../../src/domain/errors/domain-error.js";
import { checkFileAccess, signFile } from "../../src/domain/files/signed-urls.js";
import { requestFingerprint } from "../../src/domain/idempotency/fingerprint.js";
import { countTokens, IMAGE_PROMPT_TOKEN_ALLOWANCE, promptTokenEstimate } from "../../src/domain/text/tokens.js";
import { validateGenerationRequest } from "../../src/domain/validation/generation-request.js";
import { DEFAULT_LIMITS } from "../../src/domain/validation/limits.js";
import { validateVideoInteraction } from "../../src/domain/validation/video-interaction.js";

const base = { prompt: "p", inputImagesUrls: [], inputImagesBase64: [] };
function reasonOf(work: () => unknown): string {
  try {
    work();
  } catch (error) {
    assert.ok(error instanceof DomainError);
    return `${error.category}:${error.reason}`;
  }
  return "accepted";
}

describe("domain rules", () => {
  it("grants: * covers every model but the lite image model, which must be named", () => {
    const lite = findModel("aimodel-3.1-flash-lite-image")!;
    assert.equal(isModelGranted(["*"], findModel("aimodel-3-pro-image")!), true);
    assert.equal(isModelGranted(["*"], lite), false);
    assert.equal(isModelGranted(["aimodel-3-pro-image"], lite), false);
    assert.equal(isModelGranted(["aimodel-3.1-flash-lite-image"], lite), true);
  });

  it("catalog: -preview is accepted for the original image models only", () => {
    assert.equal(findModel("aimodel-3-pro-image-preview")?.id, "aimodel-3-pro-image");
    assert.equal(findModel("aimodel-nbx-2.1-preview"), undefined);
    assert.equal(findModel("aimodel-3.1-flash-lite-image-preview"), undefined);
  });

  it("validation: video resolution and duration rules (400 vs 422)", () => {
    const video = (resolution: string, durationSeconds?: number) => () =>
      validateGenerationRequest({ ...base, model: "videomodel-3.1-generate-001", resolution, durationSeconds }, DEFAULT_LIMITS);
    assert.equal(reasonOf(video("1080p", 6)), "bad_request:video_duration_requires_8s");
    assert.equal(reasonOf(video("4k", 4)), "bad_request:video_duration_requires_8s");
    assert.equal(reasonOf(video("720p", 3)), "invalid:invalid_duration");
    assert.equal(reasonOf(video("720p", 9)), "invalid:invalid_duration");
    assert.equal(reasonOf(video("1080p", 8)), "accepted");
    assert.equal(validateGenerationRequest({ ...base, model: "videomodel-3.1-generate-001", resolution: "1K" }, DEFAULT_LIMITS).resolution, "720p");
  });

  it("validation: the interactions endpoint takes 1 to 8 seconds, default 4, one instance", () => {
    const interaction = (durationSeconds?: number, count = 1) =>
      validateVideoInteraction({
        model: "videomodel-3.1-generate-001",
        instances: Array.from({ length: count }, () => ({ prompt: "p" })),
        parameters: { durationSeconds },
      }, DEFAULT_LIMITS);
    assert.equal(interaction().durationSeconds, 4);
    assert.equal(interaction(1).durationSeconds, 1);
    assert.equal(reasonOf(() => interaction(0)), "invalid:invalid_duration");
    assert.equal(reasonOf(() => interaction(4, 2)), "invalid:invalid_instances");
  });

  it("validation: prompt null bytes are stripped and an empty prompt refused", () => {
    const spec = validateGenerationRequest({ ...base, model: "aimodel-3.5-flash", prompt: "a\u0000b" }, DEFAULT_LIMITS);
    assert.equal(spec.prompt, "ab");
    assert.equal(reasonOf(() => validateGenerationRequest({ ...base, model: "aimodel-3.5-flash", prompt: "\u0000" }, DEFAULT_LIMITS)), "invalid:invalid_prompt");
  });

  it("validation: inline images are measured decoded, against the byte limit", () => {
    const limits = { ...DEFAULT_LIMITS, maxInputImages: 100, maxInputBytes: 10 };
    const ok = Buffer.alloc(10).toString("base64");
    const over = `data:image/png;base64,${Buffer.alloc(11).toString("base64")}`;
    const request = (b64: string) => () =>
      validateGenerationRequest({ ...base, model: "aimodel-3-pro-image", inputImagesBase64: [b64] }, limits);
    assert.equal(reasonOf(request(ok)), "accepted");
    assert.equal(reasonOf(request(over)), "invalid:input_too_large");
    assert.equal(reasonOf(request("not base64!")), "invalid:invalid_input_image");
  });

  it("output sizes follow resolution and aspect ratio", () => {
    assert.deepEqual(imagePixelSize("16:9", "1K"), { width: 1024, height: 576 });
    assert.deepEqual(imagePixelSize(undefined, "2K"), { width: 2048, height: 2048 });
    assert.deepEqual(imagePixelSize("1:8", "4K"), { width: 512, height: 4096 });
    assert.deepEqual(videoFrameSize("9:16", "1080p"), { width: 1080, height: 1920 });
  });

  it("signed file links: valid, tampered, expired", () => {
    const secret = Buffer.from("s3cret");
    const signature = signFile(secret, "outputs/a.png", 100);
    assert.equal(checkFileAccess(secret, "outputs/a.png", 100, signature, 99), "granted");
    assert.equal(checkFileAccess(secret, "outputs/b.png", 100, signature, 99), "bad_signature");
    assert.equal(checkFileAccess(secret, "outputs/a.png", 101, signature, 99), "bad_signature");
    assert.equal(checkFileAccess(secret, "outputs/a.png", 100, signature, 101), "expired");
  });

  it("idempotency fingerprints ignore key order but not values", () => {
    assert.equal(requestFingerprint("op", { a: 1, b: { c: 2, d: 3 } }), requestFingerprint("op", { b: { d: 3, c: 2 }, a: 1 }));
    assert.notEqual(requestFingerprint("op", { a: 1 }), requestFingerprint("op", { a: 2 }));
    assert.notEqual(requestFingerprint("op1", { a: 1 }), requestFingerprint("op2", { a: 1 }));
  });

  it("reserves for input images on top of the prompt text", () => {
    assert.equal(promptTokenEstimate("abcd", 0), 1);
    assert.equal(promptTokenEstimate("abcd", 2), 1 + 2 * IMAGE_PROMPT_TOKEN_ALLOWANCE);
  });

  it("counts tokens as started 4-byte groups of UTF-8", () => {
    assert.equal(countTokens(""), 0);
    assert.equal(countTokens("abcd"), 1);
    assert.equal(countTokens("abcde"), 2);
    assert.equal(countTokens("é"), 1);
  });
});
