// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  FunctionCallingConfigMode, GoogleGenAI, HarmBlockThreshold, HarmCategory, Type, type Content, type FunctionDeclaration,
  type GenerateContentResponse,
} from "@google/genai";
import { balanceOf, call, createCustomer, eventually, pico, startTestService, type Customer, type TestService } from "../support/harness.js";
import { allEntries } from "../support/ledger-helpers.js";
import { chargeFor } from "../support/upstream-helpers.js";
import { tokenCharge, tokensOf, VENDOR } from "../support/vendor-helpers.js";
import { startVendorStub, stubAnswer, THOUGHTS_TOKENS, type VendorStub } from "../support/vendor-stub.js";
import { FLASH, sdkBaseUrl } from "../support/vendor-sdk-helpers.js";

/**
 * The vendor's JavaScript SDK (@google/genai), given only a base URL and a
 * key, with function calling, safety settings, thinking and JSON answers; each
 * call's charge is read back from the account's statement.
 */
const client = (service: TestService, apiKey: string) => new GoogleGenAI({ apiKey, httpOptions: { baseUrl: sdkBaseUrl(service) } });

const PRO = { model: "aimodel-3.1-pro-preview", input: "2.00", output: "12.00" };

const weather: FunctionDeclaration = {
  name: "get_weather",
  description: "The current weather of a city",
  parameters: {
    type: Type.OBJECT,
    properties: { city: { type: Type.STRING }, unit: { type: Type.STRING, enum: ["celsius", "fahrenheit"] }, days: { type: Type.INTEGER } },
    required: ["city", "unit"],
  },
};
const tools = [{ functionDeclarations: [weather] }];

/** The charges of the account's statement, oldest first: amount charged and the tokens it names. */
async function charges(service: TestService, apiKey: string) {
  await eventually(() => balanceOf(service, apiKey), (b) => b.reserved === "0.00", { what: "every hold to end" });
  const entries = (await allEntries(service, { key: apiKey })).filter((e) => e.type === "charge").reverse();
  return entries.map((e) => ({ amount: -pico(e.amount), prompt: e.prompt_token_count, output: e.candidates_token_count }));
}

/** The statement's charge for a call whose usage the SDK read: exactly its tokens at the model's prices. */
function expectedCharge(prices: { input: string; output: string }, response: GenerateContentResponse) {
  const usage = response.usageMetadata!;
  const output = (usage.candidatesTokenCount ?? 0) + (usage.thoughtsTokenCount ?? 0);
  return { amount: tokenCharge(prices, usage.promptTokenCount!, output), prompt: usage.promptTokenCount!, output };
}

/** The service's countTokens for a whole request, as the reservation counts it. */
async function countWhole(service: TestService, apiKey: string, model: string, request: Record<string, unknown>): Promise<number> {
  const response = await call(service, "POST", `${VENDOR}/models/${model}:countTokens`, {
    vendorKey: apiKey, body: { generateContentRequest: { model: `models/${model}`, ...request } },
  });
  assert.equal(response.status, 200, response.text);
  return response.json.totalTokens;
}

describe("when the vendor's JavaScript SDK uses function calling, safety settings, thinking and JSON answers (simulated provider)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("when it declares a function and the model calls it, then the caller's functionResponse gets the final answer; both calls charged exactly", async () => {
    const customer: Customer = await createCustomer(service, "10.00");
    const ai = client(service, customer.apiKey);
    const question = "What is the weather in Paris? [simulate:function]";
    const config = { tools, toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.AUTO } } };
    const first = await ai.models.generateContent({ model: FLASH.model, contents: question, config });
    const calls = first.functionCalls ?? [];
    assert.equal(calls.length, 1, JSON.stringify(first.candidates));
    const called = calls[0]!;
    assert.equal(called.name, "get_weather");
    // A minimal valid instance of the declared parameters: the required members, the first enum value.
    assert.deepEqual(called.args, { city: "", unit: "celsius" });
    assert.equal(first.usageMetadata!.candidatesTokenCount, tokensOf(JSON.stringify({ id: called.id, name: called.name, args: called.args })));
    const declared = await countWhole(service, customer.apiKey, FLASH.model, { contents: [{ role: "user", parts: [{ text: question }] }], tools });
    assert.equal(first.usageMetadata!.promptTokenCount, declared, "the declarations are prompt tokens, as countTokens counts them");
    assert.ok(declared > tokensOf(question) + 20, `the declarations count: ${declared}`);

    const history: Content[] = [
      { role: "user", parts: [{ text: question }] },
      first.candidates![0]!.content!,
      { role: "user", parts: [{ functionResponse: { id: called.id, name: called.name, response: { output: "18 degrees and sunny" } } }] },
    ];
    const second = await ai.models.generateContent({ model: FLASH.model, contents: history, config });
    assert.equal(second.functionCalls, undefined, "the last turn is the function's result: the model answers in text");
    assert.match(second.text ?? "", /^Simulated answer from aimodel-3\.5-flash/);
    assert.ok(second.usageMetadata!.promptTokenCount! > first.usageMetadata!.promptTokenCount!, "the replayed call and its result are prompt");

    assert.deepEqual(await charges(service, customer.apiKey), [expectedCharge(FLASH, first), expectedCharge(FLASH, second)]);
  });

  it("when it streams with function declarations, then a chunk carries the function call, and the stream is charged its usage", async () => {
    const customer = await createCustomer(service, "10.00");
    const ai = client(service, customer.apiKey);
    const chunks: GenerateContentResponse[] = [];
    const stream = await ai.models.generateContentStream({ model: FLASH.model, contents: "Weather in Oslo? [simulate:function]", config: { tools } });
    for await (const chunk of stream) chunks.push(chunk);
    const called = chunks.flatMap((c) => c.functionCalls ?? []);
    assert.deepEqual(called.map((c) => [c.name, c.args]), [["get_weather", { city: "", unit: "celsius" }]]);
    assert.deepEqual(await charges(service, customer.apiKey), [expectedCharge(FLASH, chunks.at(-1)!)]);
  });

  it("when it sends safety settings, then the call is answered and charged as without them", async () => {
    const customer = await createCustomer(service, "10.00");
    const ai = client(service, customer.apiKey);
    const prompt = "Tell me about the sea";
    const safetySettings = [
      { category: HarmCategory.HARM_CATEGORY_HARASSMENT, threshold: HarmBlockThreshold.BLOCK_ONLY_HIGH },
      { category: HarmCategory.HARM_CATEGORY_DANGEROUS_CONTENT, threshold: HarmBlockThreshold.BLOCK_NONE },
    ];
    const safe = await ai.models.generateContent({ model: FLASH.model, contents: prompt, config: { safetySettings } });
    const plain = await ai.models.generateContent({ model: FLASH.model, contents: prompt });
    assert.equal(safe.text, plain.text);
    assert.deepEqual(safe.usageMetadata, plain.usageMetadata);
    assert.deepEqual(await charges(service, customer.apiKey), [expectedCharge(FLASH, safe), expectedCharge(FLASH, plain)]);
  });

  it("when it asks for thinking with a budget and no maxOutputTokens, then the thought comes first, thoughtsTokenCount is charged as output", async () => {
    const customer = await createCustomer(service, "10.00");
    const ai = client(service, customer.apiKey);
    const prompt = "Why is the sky blue?";
    const response = await ai.models.generateContent({
      model: FLASH.model, contents: prompt, config: { thinkingConfig: { thinkingBudget: 1024, includeThoughts: true } },
    });
    const parts = response.candidates![0]!.content!.parts!;
    assert.equal(parts[0]!.thought, true);
    const thought = parts[0]!.text!;
    assert.match(thought, /^Thinking about "Why is the sky blue\?"/);
    const usage = response.usageMetadata!;
    assert.equal(usage.thoughtsTokenCount, tokensOf(thought));
    assert.equal(response.text, parts.slice(1).map((p) => p.text).join(""), "the SDK's text leaves the thought out");
    assert.equal(usage.candidatesTokenCount, tokensOf(response.text!));
    assert.equal(usage.totalTokenCount, usage.promptTokenCount! + usage.candidatesTokenCount! + usage.thoughtsTokenCount!);
    const [charged] = await charges(service, customer.apiKey);
    assert.deepEqual(charged, expectedCharge(FLASH, response));
    assert.equal(charged!.amount, tokenCharge(FLASH, tokensOf(prompt), tokensOf(response.text!) + tokensOf(thought)));
  });

  it("when it asks for a JSON answer with a response schema, then the text is a valid instance of it, and it is charged exactly", async () => {
    const customer = await createCustomer(service, "10.00");
    const ai = client(service, customer.apiKey);
    const responseSchema = {
      type: Type.OBJECT,
      properties: { name: { type: Type.STRING }, tags: { type: Type.ARRAY, items: { type: Type.STRING }, minItems: "1" }, kind: { type: Type.STRING, enum: ["a", "b"] } },
      required: ["name", "tags", "kind"],
    };
    const response = await ai.models.generateContent({
      model: FLASH.model, contents: "Describe a lighthouse as JSON", config: { responseMimeType: "application/json", responseSchema },
    });
    assert.deepEqual(JSON.parse(response.text!), { name: "", tags: [], kind: "a" });
    assert.deepEqual(await charges(service, customer.apiKey), [expectedCharge(FLASH, response)]);
  });
});

describe("when the vendor's JavaScript SDK uses function calling and thinking while the vendor is the upstream (the stub)", () => {
  let stub: VendorStub;
  let service: TestService;
  before(async () => {
    stub = await startVendorStub();
    service = await startTestService({
      VENDOR_BASE_URL: stub.url, VENDOR_API_KEY: stub.apiKey, SAFETY_MIN_THRESHOLDS: "HARM_CATEGORY_HARASSMENT=BLOCK_MEDIUM_AND_ABOVE",
    });
  });
  after(async () => {
    await service?.close();
    await stub?.close();
  });

  it("when the upstream answers a thought and a signed function call, then both reach the SDK, thoughtsTokenCount is charged, and the replay carries the signature", async () => {
    const customer = await createCustomer(service, "10.00");
    const ai = client(service, customer.apiKey);
    const question = "Weather in Lisbon?";
    const config = { tools, thinkingConfig: { includeThoughts: true } };
    const mark = stub.requests.length;
    const first = await ai.models.generateContent({ model: PRO.model, contents: question, config });
    const parts = first.candidates![0]!.content!.parts!;
    assert.deepEqual(parts.map((p) => [p.thought ?? false, p.text, p.functionCall?.name]), [
      [true, `Thinking about: ${question}`, undefined], [false, undefined, "get_weather"],
    ]);
    assert.deepEqual(first.functionCalls![0]!.args, { query: question });
    assert.equal(parts[1]!.thoughtSignature, Buffer.from("signature of get_weather").toString("base64"));
    const upstreamFirst = stub.requests.slice(mark).find((r) => r.model === PRO.model)!;
    assert.deepEqual((upstreamFirst.body as { tools: unknown }).tools, tools, "the declarations reach the upstream as given");
    assert.equal(first.usageMetadata!.thoughtsTokenCount, THOUGHTS_TOKENS);
    assert.equal(first.usageMetadata!.candidatesTokenCount, upstreamFirst.lastUsage!.candidatesTokenCount);
    assert.equal(first.usageMetadata!.promptTokenCount, upstreamFirst.lastUsage!.promptTokenCount);

    const replay: Content[] = [
      { role: "user", parts: [{ text: question }] },
      first.candidates![0]!.content!,
      { role: "user", parts: [{ functionResponse: { name: "get_weather", response: { output: "windy" } } }] },
    ];
    const mark2 = stub.requests.length;
    const second = await ai.models.generateContent({ model: PRO.model, contents: replay, config: { tools } });
    assert.equal(second.text, stubAnswer(question));
    const upstreamSecond = stub.requests.slice(mark2).find((r) => r.model === PRO.model)!;
    const sent = (upstreamSecond.body as { contents: { parts: Record<string, unknown>[] }[] }).contents;
    assert.deepEqual(sent[1]!.parts.find((p) => p.functionCall), {
      functionCall: { name: "get_weather", args: { query: question } }, thoughtSignature: Buffer.from("signature of get_weather").toString("base64"),
    });
    assert.deepEqual(sent[2]!.parts, [{ functionResponse: { name: "get_weather", response: { output: "windy" } } }]);
    assert.deepEqual((upstreamSecond.body as { safetySettings: unknown }).safetySettings,
      [{ category: "HARM_CATEGORY_HARASSMENT", threshold: "BLOCK_MEDIUM_AND_ABOVE" }], "the operator's minimum is added");

    assert.deepEqual((await charges(service, customer.apiKey)).map((c) => c.amount), [
      chargeFor(PRO, upstreamFirst.lastUsage!), chargeFor(PRO, upstreamSecond.lastUsage!),
    ]);
    assert.deepEqual(await charges(service, customer.apiKey), [expectedCharge(PRO, first), expectedCharge(PRO, second)]);
  });

  it("when the caller's safety threshold is looser than the operator's minimum, then the upstream gets the minimum; a stricter one passes as given", async () => {
    const customer = await createCustomer(service, "10.00");
    const ai = client(service, customer.apiKey);
    const mark = stub.requests.length;
    const safetySettings = [
      { category: HarmCategory.HARM_CATEGORY_HARASSMENT, threshold: HarmBlockThreshold.BLOCK_NONE },
      { category: HarmCategory.HARM_CATEGORY_HATE_SPEECH, threshold: HarmBlockThreshold.BLOCK_LOW_AND_ABOVE },
    ];
    const response = await ai.models.generateContent({ model: FLASH.model, contents: "Hello there", config: { safetySettings } });
    const upstream = stub.requests.slice(mark).find((r) => r.model === FLASH.model)!;
    assert.deepEqual((upstream.body as { safetySettings: unknown }).safetySettings, [
      { category: "HARM_CATEGORY_HARASSMENT", threshold: "BLOCK_MEDIUM_AND_ABOVE" },
      { category: "HARM_CATEGORY_HATE_SPEECH", threshold: "BLOCK_LOW_AND_ABOVE" },
    ]);
    assert.deepEqual(await charges(service, customer.apiKey), [expectedCharge(FLASH, response)]);
    assert.equal(expectedCharge(FLASH, response).amount, chargeFor(FLASH, upstream.lastUsage!));
  });

  it("when the upstream streams a signed function call, then the SDK's stream carries it with its signature, and the upstream's usage is charged", async () => {
    const customer = await createCustomer(service, "10.00");
    const ai = client(service, customer.apiKey);
    const mark = stub.requests.length;
    const chunks: GenerateContentResponse[] = [];
    for await (const chunk of await ai.models.generateContentStream({ model: FLASH.model, contents: "Weather in Porto?", config: { tools } })) {
      chunks.push(chunk);
    }
    const parts = chunks.flatMap((c) => c.candidates?.[0]?.content?.parts ?? []);
    assert.deepEqual(parts, [{
      functionCall: { name: "get_weather", args: { query: "Weather in Porto?" } }, thoughtSignature: Buffer.from("signature of get_weather").toString("base64"),
    }]);
    const upstream = stub.requests.slice(mark).find((r) => r.model === FLASH.model)!;
    assert.equal(chunks.at(-1)!.usageMetadata!.candidatesTokenCount, upstream.lastUsage!.candidatesTokenCount);
    assert.deepEqual((await charges(service, customer.apiKey)).map((c) => c.amount), [chargeFor(FLASH, upstream.lastUsage!)]);
  });

  it("when a streamed answer carries thought parts and thoughtsTokenCount, then they reach the SDK and the thoughts are charged", async () => {
    const customer = await createCustomer(service, "10.00");
    const ai = client(service, customer.apiKey);
    const prompt = "Explain tides slowly";
    const mark = stub.requests.length;
    const chunks: GenerateContentResponse[] = [];
    const stream = await ai.models.generateContentStream({ model: PRO.model, contents: prompt, config: { thinkingConfig: { thinkingBudget: 512, includeThoughts: true } } });
    for await (const chunk of stream) chunks.push(chunk);
    assert.equal(chunks[0]!.candidates![0]!.content!.parts![0]!.thought, true);
    assert.equal(chunks.map((c) => c.text ?? "").join(""), stubAnswer(prompt));
    const upstream = stub.requests.slice(mark).find((r) => r.model === PRO.model)!;
    const generation = (upstream.body as { generationConfig: { maxOutputTokens: number } }).generationConfig;
    assert.equal(generation.maxOutputTokens, 8192 + 512, "the upstream is held to the allowance plus the thinking budget");
    assert.equal(chunks.at(-1)!.usageMetadata!.thoughtsTokenCount, THOUGHTS_TOKENS);
    assert.deepEqual((await charges(service, customer.apiKey)).map((c) => c.amount), [chargeFor(PRO, upstream.lastUsage!)]);
  });
});
