// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ApiError, BlockedReason, FinishReason, GoogleGenAI, Modality, type GenerateContentResponse } from "@google/genai";
import { balanceOf, createCustomer, startTestService, type Customer, type TestService } from "../support/harness.js";
import { chargeFor } from "../support/upstream-helpers.js";
import { tokenCharge, tokensOf } from "../support/vendor-helpers.js";
import { probePng } from "../support/media-probe.js";
import { assertImageCharged, assertNothingCharged, IMAGE_PRICES, pngSizeFor } from "../support/vendor-image-helpers.js";
import { startVendorStub, stubAnswer, stubImageCaption, type VendorStub } from "../support/vendor-stub.js";
import {
  assertUntouched, DEFAULT_INPUT_TOKEN_LIMIT, FLASH, sdkBaseUrl, settledCharge, LISTED_MODELS, TEXT_MAX_OUTPUT_TOKENS,
} from "../support/vendor-sdk-helpers.js";

/**
 * The vendor's official JavaScript SDK (@google/genai), configured as its
 * documentation says with nothing but a key and a base URL, against the
 * vendor surface.
 */
const client = (service: TestService, apiKey: string) => new GoogleGenAI({ apiKey, httpOptions: { baseUrl: sdkBaseUrl(service) } });

/** The SDK's ApiError: the HTTP status, and the vendor's error body as its message. */
async function apiError(work: () => Promise<unknown>): Promise<{ status: number; body: any }> {
  const error = await work().then(
    () => assert.fail("expected the SDK to throw an ApiError"),
    (thrown: unknown) => thrown,
  );
  assert.ok(error instanceof ApiError, `an ApiError, got ${String(error)}`);
  return { status: error.status, body: JSON.parse(error.message) };
}

const usageOf = (response: GenerateContentResponse) => response.usageMetadata!;

const FLASH_IMAGE = "aimodel-3.1-flash-image";

/** The answer's one image part, decoded: its type and bytes. */
function imageOf(response: GenerateContentResponse): { mimeType?: string; bytes: Buffer } {
  const images = (response.candidates?.[0]?.content?.parts ?? []).filter((part) => part.inlineData);
  assert.equal(images.length, 1, "one inlineData part");
  return { mimeType: images[0]!.inlineData!.mimeType, bytes: Buffer.from(images[0]!.inlineData!.data!, "base64") };
}

describe("when the vendor's JavaScript SDK is given only this service's base URL and a key", () => {
  let service: TestService;
  let customer: Customer;
  let ai: GoogleGenAI;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "10.00");
    ai = client(service, customer.apiKey);
  });
  after(() => service.close());

  it("when it calls generateContent, then it reads the answer and the usage, and exactly that usage is charged", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const prompt = "Décris un phare à Zürich ☕";
    const response = await ai.models.generateContent({ model: FLASH.model, contents: prompt });
    assert.ok(response.text && response.text.length > 0);
    assert.equal(response.candidates?.[0]?.finishReason, FinishReason.STOP);
    const usage = usageOf(response);
    assert.equal(usage.promptTokenCount, tokensOf(prompt));
    assert.equal(usage.candidatesTokenCount, tokensOf(response.text));
    assert.equal(usage.totalTokenCount, usage.promptTokenCount! + usage.candidatesTokenCount!);
    assert.equal(
      await settledCharge(service, customer.apiKey, before),
      tokenCharge(FLASH, usage.promptTokenCount!, usage.candidatesTokenCount!),
    );
  });

  it("when it streams with generateContentStream, then the chunks join into the unary answer and the last one carries STOP and the final usage", async () => {
    const prompt = "write two sentences about lighthouses";
    const unary = await ai.models.generateContent({ model: FLASH.model, contents: prompt });
    const chunks: GenerateContentResponse[] = [];
    for await (const chunk of await ai.models.generateContentStream({ model: FLASH.model, contents: prompt })) chunks.push(chunk);
    assert.ok(chunks.length >= 3, `several chunks, got ${chunks.length}`);
    assert.equal(chunks.map((c) => c.text ?? "").join(""), unary.text);
    const last = chunks.at(-1)!;
    assert.equal(last.candidates?.[0]?.finishReason, FinishReason.STOP);
    assert.deepEqual(
      { ...usageOf(last), promptTokensDetails: undefined, candidatesTokensDetails: undefined },
      { ...usageOf(unary), promptTokensDetails: undefined, candidatesTokensDetails: undefined },
    );
  });

  it("when it chats with chats.create and sendMessage, then the second turn is sent with the first as history", async () => {
    const chat = ai.chats.create({ model: FLASH.model });
    const first = "Name a colour of the sea";
    const one = await chat.sendMessage({ message: first });
    const two = await chat.sendMessage({ message: "And once more, shorter." });
    const history = chat.getHistory();
    assert.deepEqual(history.map((c) => c.role), ["user", "model", "user", "model"]);
    assert.deepEqual(history.map((c) => (c.parts ?? []).map((p) => p.text).join("")), [first, one.text, "And once more, shorter.", two.text]);
    // The simulated provider counts the whole conversation it was sent: the history came along.
    assert.equal(usageOf(two).promptTokenCount, tokensOf([first, one.text, "And once more, shorter."].join("\n")));
  });

  it("when it chats with sendMessageStream, then the streamed turn joins the history and the next turn is sent with it", async () => {
    const chat = ai.chats.create({ model: FLASH.model });
    const first = "Tell me about tides";
    let text = "";
    for await (const chunk of await chat.sendMessageStream({ message: first })) text += chunk.text ?? "";
    assert.ok(text.length > 0);
    // The SDK keeps the streamed turn as the model contents of its chunks, one after another.
    const [question, ...answer] = chat.getHistory();
    assert.equal(question!.role, "user");
    assert.ok(answer.length > 0 && answer.every((c) => c.role === "model"));
    assert.equal(answer.flatMap((c) => (c.parts ?? []).map((p) => p.text)).join(""), text);
    const next = await chat.sendMessage({ message: "Shorter, please." });
    const sent = [first, ...answer.map((c) => (c.parts ?? []).map((p) => p.text).join("")), "Shorter, please."];
    assert.equal(usageOf(next).promptTokenCount, tokensOf(sent.join("\n")));
  });

  it("when it counts tokens, then countTokens gives the prompt tokens generateContent reports, and nothing is charged", async () => {
    const counter = await createCustomer(service, "1.00");
    const counting = client(service, counter.apiKey);
    const prompt = "How many tokens is this sentence, exactly? ✓";
    const counted = await counting.models.countTokens({ model: FLASH.model, contents: prompt });
    assert.equal(counted.totalTokens, tokensOf(prompt));
    await assertUntouched(service, counter.apiKey, "1.00");
    const answer = await counting.models.generateContent({ model: FLASH.model, contents: prompt });
    assert.equal(usageOf(answer).promptTokenCount, counted.totalTokens);
  });

  it("when it lists models with pageSize 3, then the pager follows nextPageToken through pages of 3, 3, 3, 3 and 1 and sees every text and image model once", async () => {
    const pager = await ai.models.list({ config: { pageSize: 3 } });
    const pages = [pager.page.map((m) => m.name)];
    while (pager.hasNextPage()) pages.push((await pager.nextPage()).map((m) => m.name));
    assert.deepEqual(pages.map((page) => page.length), [3, 3, 3, 3, 1]);
    const names = LISTED_MODELS.map((id) => `models/${id}`);
    assert.deepEqual(pages.flat(), names);
    const all: string[] = [];
    for await (const model of await ai.models.list()) all.push(model.name!);
    assert.deepEqual(all, names);
  });

  it("when it gets a model, then models.get gives the vendor's Model fields", async () => {
    const model = await ai.models.get({ model: FLASH.model });
    assert.equal(model.name, `models/${FLASH.model}`);
    assert.equal(model.displayName, "AIModel 3.5 Flash");
    assert.equal(typeof model.description, "string");
    assert.equal(model.version, "3.5");
    assert.equal(model.inputTokenLimit, DEFAULT_INPUT_TOKEN_LIMIT);
    assert.equal(model.outputTokenLimit, TEXT_MAX_OUTPUT_TOKENS);
    assert.deepEqual(model.supportedActions, ["generateContent", "streamGenerateContent", "countTokens"]);
  });

  it("when it gets an image model, then models.get says it answers generateContent and streamGenerateContent, not countTokens", async () => {
    const model = await ai.models.get({ model: FLASH_IMAGE });
    assert.equal(model.name, `models/${FLASH_IMAGE}`);
    assert.equal(model.outputTokenLimit, 0);
    assert.deepEqual(model.supportedActions, ["generateContent", "streamGenerateContent"]);
  });

  it("when it gets a model that is neither a text nor an image model, then the SDK throws ApiError 404 NOT_FOUND", async () => {
    const { status, body } = await apiError(() => ai.models.get({ model: "videomodel-3.1-generate-001" }));
    assert.equal(status, 404);
    assert.equal(body.error.status, "NOT_FOUND");
  });

  it("when the prompt is blocked, then generateContent gives no text and no candidates, and promptFeedback.blockReason SAFETY, uncharged", async () => {
    const blocked = await createCustomer(service, "1.00");
    const sdk = client(service, blocked.apiKey);
    const response = await sdk.models.generateContent({ model: FLASH.model, contents: "tell me something [simulate:blocked]" });
    assert.equal(response.text, undefined);
    assert.ok(!response.candidates?.length);
    assert.equal(response.promptFeedback?.blockReason, BlockedReason.SAFETY);
    const chunks: GenerateContentResponse[] = [];
    for await (const chunk of await sdk.models.generateContentStream({ model: FLASH.model, contents: "again [simulate:blocked]" })) chunks.push(chunk);
    assert.ok(chunks.some((c) => c.promptFeedback?.blockReason === BlockedReason.SAFETY), "a streamed chunk says why");
    assert.ok(chunks.every((c) => c.text === undefined));
    await assertUntouched(service, blocked.apiKey, "1.00");
  });

  it("when the balance is zero, then the SDK throws ApiError 402 RESOURCE_EXHAUSTED naming INSUFFICIENT_FUNDS, unary and streaming, and nothing is held", async () => {
    const poor = await createCustomer(service, "0.00");
    const sdk = client(service, poor.apiKey);
    const calls = [
      () => sdk.models.generateContent({ model: FLASH.model, contents: "hello" }),
      async () => {
        for await (const _chunk of await sdk.models.generateContentStream({ model: FLASH.model, contents: "hello" })) {
          // A refusal comes before the first chunk, as an HTTP error.
        }
      },
      () => sdk.chats.create({ model: FLASH.model }).sendMessage({ message: "hello" }),
    ];
    for (const work of calls) {
      const { status, body } = await apiError(work);
      assert.equal(status, 402);
      assert.equal(body.error.code, 402);
      assert.equal(body.error.status, "RESOURCE_EXHAUSTED");
      assert.equal(body.error.details[0].reason, "INSUFFICIENT_FUNDS");
      assert.match(body.error.message, /balance/);
    }
    await assertUntouched(service, poor.apiKey, "0.00");
  });

  it("when it asks generateContent for TEXT and IMAGE at 16:9, then response.data is a 16:9 PNG beside the text, charged the per-image price", async () => {
    const buyer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, buyer.apiKey);
    const response = await client(service, buyer.apiKey).models.generateContent({
      model: FLASH_IMAGE,
      contents: "a lighthouse at dusk [simulate:with-text]",
      config: { responseModalities: [Modality.TEXT, Modality.IMAGE], imageConfig: { aspectRatio: "16:9" } },
    });
    assert.equal(response.candidates?.[0]?.finishReason, FinishReason.STOP);
    assert.ok(response.text && response.text.length > 0, "the provider's text part");
    const image = imageOf(response);
    assert.equal(image.mimeType, "image/png");
    assert.equal(response.data, image.bytes.toString("base64"), "the SDK's data getter reads the image");
    assert.deepEqual(probePng(image.bytes), pngSizeFor("16:9", 1024));
    await assertImageCharged(service, buyer.apiKey, before, FLASH_IMAGE, IMAGE_PRICES[FLASH_IMAGE]!["1K"]!);
  });

  it("when it streams an image with generateContentStream at 2K, then a chunk carries the PNG and STOP, charged the 2K per-image price", async () => {
    const buyer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, buyer.apiKey);
    const chunks: GenerateContentResponse[] = [];
    const stream = await client(service, buyer.apiKey).models.generateContentStream({
      model: FLASH_IMAGE,
      contents: "a red kite over a cliff",
      config: { responseModalities: [Modality.IMAGE], imageConfig: { aspectRatio: "3:4", imageSize: "2K" } },
    });
    for await (const chunk of stream) chunks.push(chunk);
    const withImage = chunks.filter((chunk) => chunk.candidates?.[0]?.content?.parts?.some((part) => part.inlineData));
    assert.equal(withImage.length, 1, "one chunk carries the image");
    assert.deepEqual(probePng(imageOf(withImage[0]!).bytes), pngSizeFor("3:4", 2048));
    assert.equal(chunks.at(-1)!.candidates?.[0]?.finishReason, FinishReason.STOP);
    await assertImageCharged(service, buyer.apiKey, before, FLASH_IMAGE, IMAGE_PRICES[FLASH_IMAGE]!["2K"]!);
  });

  it("when the image's aspect ratio is not the model's, or the balance is zero, or the key lacks the model, then 400, 402 and 403, nothing held", async () => {
    const buyer = await createCustomer(service, "10.00", ["aimodel-3.5-flash", "aimodel-2.5-flash-image"]);
    const ask = (key: string, model: string, aspectRatio: string) => () =>
      client(service, key).models.generateContent({ model, contents: "a wide view", config: { imageConfig: { aspectRatio } } });
    const wrongRatio = await apiError(ask(buyer.apiKey, "aimodel-2.5-flash-image", "8:1"));
    assert.deepEqual([wrongRatio.status, wrongRatio.body.error.status, wrongRatio.body.error.details[0].reason],
      [400, "INVALID_ARGUMENT", "UNSUPPORTED_ASPECT_RATIO"]);
    const notGranted = await apiError(ask(buyer.apiKey, FLASH_IMAGE, "1:1"));
    assert.deepEqual([notGranted.status, notGranted.body.error.status], [403, "PERMISSION_DENIED"]);
    const poor = await createCustomer(service, "0.00");
    const broke = await apiError(ask(poor.apiKey, FLASH_IMAGE, "1:1"));
    assert.deepEqual([broke.status, broke.body.error.status, broke.body.error.details[0].reason], [402, "RESOURCE_EXHAUSTED", "INSUFFICIENT_FUNDS"]);
    await assertNothingCharged(service, buyer.apiKey, "10.00");
    await assertNothingCharged(service, poor.apiKey, "0.00");
  });

  it("when the key is wrong, then the SDK throws ApiError 401 UNAUTHENTICATED", async () => {
    const { status, body } = await apiError(() => client(service, "sk_not-a-key").models.generateContent({ model: FLASH.model, contents: "hi" }));
    assert.equal(status, 401);
    assert.equal(body.error.status, "UNAUTHENTICATED");
  });
});

describe("when the vendor's JavaScript SDK calls this service while the vendor itself is the upstream (the stub)", () => {
  let stub: VendorStub;
  let service: TestService;
  let ai: GoogleGenAI;
  let customer: Customer;
  before(async () => {
    stub = await startVendorStub();
    service = await startTestService({ VENDOR_BASE_URL: stub.url, VENDOR_API_KEY: stub.apiKey });
    customer = await createCustomer(service, "10.00");
    ai = client(service, customer.apiKey);
  });
  after(async () => {
    await service?.close();
    await stub?.close();
  });

  it("when the upstream answers, then the SDK gets the upstream's text and usage, unary and streamed, and the upstream's usage is charged", async () => {
    const prompt = "What do lighthouse keepers do?";
    const before = await balanceOf(service, customer.apiKey);
    const mark = stub.requests.length;
    const response = await ai.models.generateContent({ model: FLASH.model, contents: prompt });
    assert.equal(response.text, stubAnswer(prompt));
    const sent = stub.requests.slice(mark).filter((r) => r.path.includes(`/models/${FLASH.model}:`));
    assert.equal(sent.length, 1, "one upstream request");
    const upstream = sent[0]!;
    assert.equal(usageOf(response).promptTokenCount, upstream.lastUsage!.promptTokenCount);
    assert.equal(await settledCharge(service, customer.apiKey, before), chargeFor(FLASH, upstream.lastUsage!));
    let streamed = "";
    for await (const chunk of await ai.models.generateContentStream({ model: FLASH.model, contents: prompt })) streamed += chunk.text ?? "";
    assert.equal(streamed, stubAnswer(prompt));
  });

  it("when the upstream answers an image in its wire format, then the SDK gets its text and PNG, charged the per-image price", async () => {
    const buyer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, buyer.apiKey);
    const prompt = "a harbour in fog";
    const response = await client(service, buyer.apiKey).models.generateContent({
      model: FLASH_IMAGE, contents: prompt, config: { responseModalities: [Modality.TEXT, Modality.IMAGE], imageConfig: { aspectRatio: "4:3" } },
    });
    assert.equal(response.text, stubImageCaption(prompt));
    assert.deepEqual(probePng(imageOf(response).bytes), pngSizeFor("4:3", 1024));
    await assertImageCharged(service, buyer.apiKey, before, FLASH_IMAGE, IMAGE_PRICES[FLASH_IMAGE]!["1K"]!);
  });

  it("when the upstream blocks the prompt, then the SDK gets the upstream's promptFeedback.blockReason and no text, uncharged", async () => {
    const blocked = await createCustomer(service, "1.00");
    stub.fault({ kind: "blocked", blockReason: "PROHIBITED_CONTENT" }, { model: FLASH.model, times: 1 });
    const response = await client(service, blocked.apiKey).models.generateContent({ model: FLASH.model, contents: "a forbidden question" });
    assert.equal(response.promptFeedback?.blockReason, BlockedReason.PROHIBITED_CONTENT);
    assert.equal(response.text, undefined);
    await assertUntouched(service, blocked.apiKey, "1.00");
  });

  it("when the upstream fails on every try, then the SDK throws ApiError 503 UNAVAILABLE, and nothing is charged", async () => {
    const unlucky = await createCustomer(service, "1.00");
    const failing = stub.fault({ kind: "status", status: 500 }, { model: FLASH.model });
    try {
      const { status, body } = await apiError(() => client(service, unlucky.apiKey).models.generateContent({ model: FLASH.model, contents: "hi" }));
      assert.equal(status, 503);
      assert.equal(body.error.status, "UNAVAILABLE");
      assert.ok(failing.hits > 0);
    } finally {
      failing.remove();
    }
    await assertUntouched(service, unlucky.apiKey, "1.00");
  });
});
