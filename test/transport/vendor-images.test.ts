// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { balanceOf, call, createCustomer, startTestService, type TestService } from "../support/harness.js";
import { probePng } from "../support/media-probe.js";
import { assertVendorError, readSse, streamRequest, VENDOR } from "../support/vendor-helpers.js";
import { assertImageCharged, assertNothingCharged, IMAGE_PRICES, pngSizeFor } from "../support/vendor-image-helpers.js";
import { IMAGE_OUTPUT_TOKENS, startVendorStub, stubImageCaption, stubTokens, type VendorStub } from "../support/vendor-stub.js";

const FLASH_IMAGE = "aimodel-3.1-flash-image";
const FAST_IMAGE = "aimodel-2.5-flash-image";

const generate = (service: TestService, model: string, key: string, body: unknown, action = "generateContent") =>
  call(service, "POST", `${VENDOR}/models/${model}:${action}`, { vendorKey: key, body });

/** A request for an image, as the vendor's documentation writes one. */
const imageRequest = (prompt: string, imageConfig?: Record<string, string>, extra: Record<string, unknown> = {}) => ({
  contents: [{ role: "user", parts: [{ text: prompt }] }],
  generationConfig: { responseModalities: ["TEXT", "IMAGE"], ...(imageConfig ? { imageConfig } : {}) },
  ...extra,
});

type Part = { text?: string; inlineData?: { mimeType?: string; data?: string } };

/** The answer's one image part, decoded. */
function imageOf(parts: Part[]): { mimeType?: string; bytes: Buffer } {
  const images = parts.filter((part) => part.inlineData);
  assert.equal(images.length, 1, `one inlineData part in ${JSON.stringify(parts).slice(0, 300)}`);
  return { mimeType: images[0]!.inlineData!.mimeType, bytes: Buffer.from(images[0]!.inlineData!.data!, "base64") };
}

describe("when generateContent names an image model (the simulated provider)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("when it asks for TEXT and IMAGE at 16:9 and 2K, then the answer is a 2048×1152 PNG with the text, STOP, charged the 2K per-image price", async () => {
    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    const response = await generate(service, FLASH_IMAGE, customer.apiKey, imageRequest("a lighthouse at dusk [simulate:with-text]", {
      aspectRatio: "16:9", imageSize: "2K",
    }));
    assert.equal(response.status, 200, response.text);
    const candidate = response.json.candidates[0];
    assert.equal(candidate.finishReason, "STOP");
    assert.equal(candidate.content.role, "model");
    const parts: Part[] = candidate.content.parts;
    assert.ok(parts[0]!.text && parts[0]!.text.length > 0, "the provider's text comes first");
    const image = imageOf(parts);
    assert.equal(image.mimeType, "image/png");
    assert.deepEqual(probePng(image.bytes), pngSizeFor("16:9", 2048));
    const usage = response.json.usageMetadata;
    assert.equal(usage.totalTokenCount, usage.promptTokenCount + usage.candidatesTokenCount);
    assert.equal(response.json.modelVersion, FLASH_IMAGE);
    await assertImageCharged(service, customer.apiKey, before, FLASH_IMAGE, IMAGE_PRICES[FLASH_IMAGE]!["2K"]!);
  });

  it("when it sends no imageConfig and an input image, then the answer is the default 1K square, charged the 1K price as a job would be", async () => {
    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    const input = { inlineData: { mimeType: "image/png", data: Buffer.from(await pngBytes(service, customer.apiKey)).toString("base64") } };
    const afterInput = await balanceOf(service, customer.apiKey);
    const response = await generate(service, FLASH_IMAGE, customer.apiKey, {
      contents: [{ role: "user", parts: [{ text: "the same, in watercolour" }, input] }],
    });
    assert.equal(response.status, 200, response.text);
    const parts: Part[] = response.json.candidates[0].content.parts;
    assert.deepEqual(probePng(imageOf(parts).bytes), { width: 1024, height: 1024 });
    assert.ok(before.balance !== afterInput.balance, "the input image was itself made (and paid for) first");
    await assertImageCharged(service, customer.apiKey, afterInput, FLASH_IMAGE, IMAGE_PRICES[FLASH_IMAGE]!["1K"]!);
  });

  it("when it streams with alt=sse, then one chunk carries the image, STOP and the usage, charged the per-image price", async () => {
    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    const response = await streamRequest(service, FAST_IMAGE, imageRequest("a red kite", { aspectRatio: "3:4" }), { key: customer.apiKey });
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /text\/event-stream/);
    const { chunks } = await readSse(response);
    assert.equal(chunks.length, 1);
    const candidate = chunks[0]!.candidates![0]!;
    assert.equal(candidate.finishReason, "STOP");
    assert.deepEqual(probePng(imageOf(candidate.content!.parts as Part[]).bytes), pngSizeFor("3:4", 1024));
    assert.ok(chunks[0]!.usageMetadata);
    await assertImageCharged(service, customer.apiKey, before, FAST_IMAGE, IMAGE_PRICES[FAST_IMAGE]!["1K"]!);
  });

  it("when it streams without alt=sse, then the answer is a JSON array of that one chunk, charged the per-image price", async () => {
    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    const response = await generate(service, FLASH_IMAGE, customer.apiKey, imageRequest("a blue door", { aspectRatio: "1:1", imageSize: "4K" }),
      "streamGenerateContent");
    assert.equal(response.status, 200, response.text.slice(0, 300));
    assert.ok(Array.isArray(response.json) && response.json.length === 1);
    assert.deepEqual(probePng(imageOf(response.json[0].candidates[0].content.parts).bytes), { width: 4096, height: 4096 });
    await assertImageCharged(service, customer.apiKey, before, FLASH_IMAGE, IMAGE_PRICES[FLASH_IMAGE]!["4K"]!);
  });

  it("when the aspect ratio is one the model does not support, then 400 INVALID_ARGUMENT names the field, and nothing is held", async () => {
    const customer = await createCustomer(service, "10.00");
    const response = await generate(service, FAST_IMAGE, customer.apiKey, imageRequest("a wide view", { aspectRatio: "1:4" }));
    const error = assertVendorError(response, 400, "INVALID_ARGUMENT");
    assert.equal(error.details.find((d) => d.reason)!.reason, "UNSUPPORTED_ASPECT_RATIO");
    assert.match(error.message, /generationConfig\.imageConfig\.aspectRatio "1:4"/);
    const streamed = await streamRequest(service, FAST_IMAGE, imageRequest("a wide view", { aspectRatio: "1:4" }), { key: customer.apiKey });
    assert.equal(streamed.status, 400);
    await assertNothingCharged(service, customer.apiKey, "10.00");
  });

  it("when the image size, the modalities or a field are not for this model, then 400 INVALID_ARGUMENT, and nothing is held", async () => {
    const customer = await createCustomer(service, "10.00");
    const refusals: [string, unknown, string][] = [
      ["aimodel-3.1-flash-lite-image", imageRequest("x", { aspectRatio: "1:1", imageSize: "2K" }), "UNSUPPORTED_RESOLUTION"],
      ["aimodel-nbx-2.1", imageRequest("x"), "MISSING_ASPECT_RATIO"],
      [FLASH_IMAGE, { ...imageRequest("x"), generationConfig: { responseModalities: ["TEXT"] } }, "UNSUPPORTED_FIELD"],
      [FLASH_IMAGE, imageRequest("x", undefined, { tools: [{ functionDeclarations: [{ name: "f" }] }] }), "UNSUPPORTED_FIELD"],
      [FLASH_IMAGE, { contents: [{ role: "user", parts: [{ text: "x" }, { inlineData: { mimeType: "audio/wav", data: "AAAA" } }] }] },
        "UNSUPPORTED_MEDIA_TYPE"],
    ];
    const all = await createCustomer(service, "10.00", ["*", "aimodel-3.1-flash-lite-image"]);
    for (const [model, body, reason] of refusals) {
      const error = assertVendorError(await generate(service, model, all.apiKey, body), 400, "INVALID_ARGUMENT");
      assert.equal(error.details.find((d) => d.reason)!.reason, reason, `${model}: ${error.message}`);
    }
    await assertNothingCharged(service, all.apiKey, "10.00");
    await assertNothingCharged(service, customer.apiKey, "10.00");
  });

  it("when the balance is zero, then 402 RESOURCE_EXHAUSTED, unary and streamed, and nothing is held", async () => {
    const poor = await createCustomer(service, "0.00");
    assertVendorError(await generate(service, FLASH_IMAGE, poor.apiKey, imageRequest("x")), 402, "RESOURCE_EXHAUSTED");
    const streamed = await streamRequest(service, FLASH_IMAGE, imageRequest("x"), { key: poor.apiKey });
    assert.equal(streamed.status, 402);
    assert.equal(((await streamed.json()) as any).error.status, "RESOURCE_EXHAUSTED");
    // One cent short of the 2K image.
    const short = await createCustomer(service, "0.10");
    assertVendorError(await generate(service, FLASH_IMAGE, short.apiKey, imageRequest("x", { imageSize: "2K" })), 402, "RESOURCE_EXHAUSTED");
    await assertNothingCharged(service, poor.apiKey, "0.00");
    await assertNothingCharged(service, short.apiKey, "0.10");
  });

  it("when the key lacks the model, then 403 PERMISSION_DENIED, and nothing is held", async () => {
    const textOnly = await createCustomer(service, "10.00", ["aimodel-3.5-flash"]);
    assertVendorError(await generate(service, FLASH_IMAGE, textOnly.apiKey, imageRequest("x")), 403, "PERMISSION_DENIED");
    // `*` leaves out the lite image model, which must be named.
    const star = await createCustomer(service, "10.00");
    const lite = imageRequest("x", { aspectRatio: "1:1", imageSize: "1K" });
    assertVendorError(await generate(service, "aimodel-3.1-flash-lite-image", star.apiKey, lite), 403, "PERMISSION_DENIED");
    await assertNothingCharged(service, textOnly.apiKey, "10.00");
    await assertNothingCharged(service, star.apiKey, "10.00");
  });

  it("when the provider fails, then 503 UNAVAILABLE and the hold is released; when it blocks the prompt, the vendor's 200 answer, uncharged", async () => {
    const customer = await createCustomer(service, "1.00");
    assertVendorError(await generate(service, FLASH_IMAGE, customer.apiKey, imageRequest("x [simulate:fail]")), 503, "UNAVAILABLE");
    const blocked = await generate(service, FLASH_IMAGE, customer.apiKey, imageRequest("x [simulate:blocked]"));
    assert.equal(blocked.status, 200, blocked.text);
    assert.equal(blocked.json.promptFeedback.blockReason, "SAFETY");
    assert.equal(blocked.json.candidates, undefined);
    await assertNothingCharged(service, customer.apiKey, "1.00");
  });
});

/** A PNG made by this service (a 1K square from the fast model), to send back as an input image. */
async function pngBytes(service: TestService, key: string): Promise<Uint8Array> {
  const response = await generate(service, FAST_IMAGE, key, imageRequest("a seed image"));
  assert.equal(response.status, 200, response.text);
  return imageOf(response.json.candidates[0].content.parts).bytes;
}

describe("when generateContent names an image model and the vendor itself is the upstream (the stub)", () => {
  let stub: VendorStub;
  let service: TestService;
  before(async () => {
    stub = await startVendorStub();
    service = await startTestService({ VENDOR_BASE_URL: stub.url, VENDOR_API_KEY: stub.apiKey });
  });
  after(async () => {
    await service?.close();
    await stub?.close();
  });

  it("when the upstream answers text and an image in its wire format, then both are passed on, with its usage, charged the per-image price", async () => {
    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    const mark = stub.requests.length;
    const prompt = "a harbour in fog";
    const response = await generate(service, FLASH_IMAGE, customer.apiKey, imageRequest(prompt, { aspectRatio: "9:16", imageSize: "2K" }));
    assert.equal(response.status, 200, response.text);
    const sent = stub.requests.slice(mark).filter((r) => r.path.includes(`/models/${FLASH_IMAGE}:`));
    assert.equal(sent.length, 1, "one upstream request");
    const upstream = sent[0]!.body as any;
    assert.deepEqual(upstream.generationConfig.imageConfig, { aspectRatio: "9:16", imageSize: "2K" });
    const parts: Part[] = response.json.candidates[0].content.parts;
    assert.equal(parts[0]!.text, stubImageCaption(prompt));
    assert.deepEqual(probePng(imageOf(parts).bytes), pngSizeFor("9:16", 2048));
    const usage = response.json.usageMetadata;
    assert.equal(usage.promptTokenCount, sent[0]!.lastUsage!.promptTokenCount);
    assert.equal(usage.candidatesTokenCount, IMAGE_OUTPUT_TOKENS["2K"]! + stubTokens(stubImageCaption(prompt)));
    await assertImageCharged(service, customer.apiKey, before, FLASH_IMAGE, IMAGE_PRICES[FLASH_IMAGE]!["2K"]!);
  });

  it("when the upstream fails on every try, then 503 UNAVAILABLE, and nothing is charged", async () => {
    const customer = await createCustomer(service, "1.00");
    const failing = stub.fault({ kind: "status", status: 500 }, { model: FLASH_IMAGE });
    try {
      assertVendorError(await generate(service, FLASH_IMAGE, customer.apiKey, imageRequest("x")), 503, "UNAVAILABLE");
      assert.ok(failing.hits > 0);
    } finally {
      failing.remove();
    }
    await assertNothingCharged(service, customer.apiKey, "1.00");
  });
});
