// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { balanceOf, createCustomer, pico, startTestService, type Customer, type TestService } from "../support/harness.js";
import { openAiBaseUrl, PNG_DATA_URI, statementCharge, statementCharges } from "../support/openai-helpers.js";
import { probePng } from "../support/media-probe.js";
import { tokenCharge, tokensOf } from "../support/vendor-helpers.js";
import { assertUntouched, FLASH, LISTED_MODELS } from "../support/vendor-sdk-helpers.js";
import { startVendorStub, stubAnswer, THOUGHTS_TOKENS, type VendorStub } from "../support/vendor-stub.js";

/**
 * OpenAI's official JavaScript SDK (openai, from npm), configured with
 * nothing but this service's base URL and a key, against the
 * OpenAI-compatible surface (/api/aimodel/v1beta/openai).
 */
const client = (service: TestService, apiKey: string) => new OpenAI({ apiKey, baseURL: openAiBaseUrl(service), maxRetries: 0 });

/** The SDK's APIError for a call that must fail. */
async function apiError(work: () => Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const error = await work().then(
    () => assert.fail("expected the SDK to throw an APIError"),
    (thrown: unknown) => thrown,
  );
  assert.ok(error instanceof OpenAI.APIError, `an APIError, got ${String(error)}`);
  return error;
}

/** The published price of one image of aimodel-3-pro-image at 1K or 2K. */
const PRO_IMAGE_2K = "0.134";

const chargeOf = (usage: OpenAI.CompletionUsage) => tokenCharge(FLASH, usage.prompt_tokens, usage.completion_tokens);

describe("when OpenAI's JavaScript SDK is given only this service's OpenAI base URL and a key (simulated provider)", () => {
  let service: TestService;
  let customer: Customer;
  let openai: OpenAI;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "10.00");
    openai = client(service, customer.apiKey);
  });
  after(() => service?.close());

  it("when it creates a chat completion, then it reads the answer and the usage, and the statement charges exactly that usage", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const system = "You answer briefly.";
    const prompt = "Décris un phare à Zürich ☕";
    const completion = await openai.chat.completions.create({
      model: FLASH.model,
      messages: [{ role: "system", content: system }, { role: "user", content: prompt }],
      max_completion_tokens: 500,
      temperature: 0.2,
      stop: ["\n\n\n"],
      seed: 7,
    });
    assert.match(completion.id, /^chatcmpl-/);
    assert.equal(completion.object, "chat.completion");
    assert.equal(completion.model, FLASH.model);
    assert.ok(Number.isInteger(completion.created) && completion.created > 1_700_000_000);
    const [choice] = completion.choices;
    assert.equal(choice!.message.role, "assistant");
    assert.ok(choice!.message.content && choice!.message.content.length > 0);
    assert.equal(choice!.finish_reason, "stop");
    const usage = completion.usage!;
    // The system message is part of the prompt (the vendor's systemInstruction).
    assert.equal(usage.prompt_tokens, tokensOf(`${system}\n${prompt}`));
    assert.equal(usage.completion_tokens, tokensOf(choice!.message.content!));
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
    assert.equal(usage.completion_tokens_details?.reasoning_tokens, 0);
    const { charged, entry } = await statementCharge(service, customer.apiKey, before);
    assert.equal(charged, chargeOf(usage));
    assert.equal(entry.model, FLASH.model);
    assert.deepEqual([entry.prompt_token_count, entry.candidates_token_count], [usage.prompt_tokens, usage.completion_tokens]);
  });

  it("when it streams with include_usage, then the deltas join into the unary answer, a last chunk without choices carries the usage, and that usage is charged", async () => {
    const prompt = "write two sentences about lighthouses";
    const unary = await openai.chat.completions.create({ model: FLASH.model, messages: [{ role: "user", content: prompt }] });
    const before = await balanceOf(service, customer.apiKey);
    const stream = await openai.chat.completions.create({
      model: FLASH.model, messages: [{ role: "user", content: prompt }], stream: true, stream_options: { include_usage: true },
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.ok(chunks.length >= 4, `several chunks, got ${chunks.length}`);
    assert.equal(new Set(chunks.map((c) => c.id)).size, 1, "one id for the whole stream");
    assert.equal(chunks[0]!.choices[0]!.delta.role, "assistant");
    const text = chunks.flatMap((c) => c.choices.map((choice) => choice.delta.content ?? "")).join("");
    assert.equal(text, unary.choices[0]!.message.content);
    const finishes = chunks.flatMap((c) => c.choices.map((choice) => choice.finish_reason)).filter((f) => f !== null);
    assert.deepEqual(finishes, ["stop"]);
    const last = chunks.at(-1)!;
    assert.deepEqual(last.choices, []);
    assert.deepEqual(last.usage, unary.usage);
    for (const chunk of chunks.slice(0, -1)) assert.equal(chunk.usage, null);
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(last.usage!));
  });

  it("when it streams without include_usage, then no chunk carries usage and the stream still ends cleanly", async () => {
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    const stream = await openai.chat.completions.create({ model: FLASH.model, messages: [{ role: "user", content: "hello" }], stream: true });
    for await (const chunk of stream) chunks.push(chunk);
    assert.ok(chunks.length >= 2);
    assert.ok(chunks.every((c) => c.usage === undefined && c.choices.length === 1));
    assert.equal(chunks.at(-1)!.choices[0]!.finish_reason, "stop");
  });

  it("when a user message carries an image as a data URI, then it reaches the model with the text, and exactly the usage is charged", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const completion = await openai.chat.completions.create({
      model: FLASH.model,
      messages: [{ role: "user", content: [{ type: "text", text: "What is in this picture?" }, { type: "image_url", image_url: { url: PNG_DATA_URI } }] }],
    });
    assert.equal(completion.choices[0]!.finish_reason, "stop");
    assert.ok(completion.usage!.prompt_tokens >= tokensOf("What is in this picture?"));
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(completion.usage!));
  });

  // Links the service fetches (http and https): test/transport/openai-image-links.test.ts.
  it("when an image is given as a link that is neither http(s) nor a data URI, then the SDK raises BadRequestError naming the part, and nothing is held", async () => {
    const linker = await createCustomer(service, "1.00");
    const error = await apiError(() =>
      client(service, linker.apiKey).chat.completions.create({
        model: FLASH.model,
        messages: [{ role: "user", content: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "file:///etc/a.png" } }] }],
      }),
    );
    assert.ok(error instanceof OpenAI.BadRequestError);
    assert.equal(error.status, 400);
    assert.equal(error.param, "messages[0].content[1].image_url.url");
    assert.equal(error.type, "invalid_request_error");
    assert.match(error.message, /http\(s\) URL or a data URI/);
    await assertUntouched(service, linker.apiKey, "1.00");
  });

  it("when n is 2, then the SDK raises BadRequestError with param n, and nothing is held", async () => {
    const asker = await createCustomer(service, "1.00");
    const error = await apiError(() =>
      client(service, asker.apiKey).chat.completions.create({ model: FLASH.model, messages: [{ role: "user", content: "hi" }], n: 2 }),
    );
    assert.ok(error instanceof OpenAI.BadRequestError);
    assert.deepEqual([error.param, error.code], ["n", "unsupported_parameter"]);
    await assertUntouched(service, asker.apiKey, "1.00");
  });

  it("when a chat completion names an image model, then the SDK raises BadRequestError with param model, unary and streamed, and nothing is made or held", async () => {
    const asker = await createCustomer(service, "1.00");
    const messages = [{ role: "user" as const, content: "a lighthouse" }];
    for (const stream of [false, true]) {
      const error = await apiError(() => client(service, asker.apiKey).chat.completions.create({ model: "aimodel-3-pro-image", messages, stream }));
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.deepEqual([error.param, error.code], ["model", "unsupported_model"]);
      assert.match(error.message, /images\/generations/);
    }
    await assertUntouched(service, asker.apiKey, "1.00");
  });

  const WEATHER: OpenAI.ChatCompletionTool = {
    type: "function",
    function: {
      name: "get_weather", description: "The weather in a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  };

  it("when the model calls a declared tool and the tool's answer is sent back, then tool_calls carry JSON arguments, the second answer is text, and each call is charged exactly", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const question: OpenAI.ChatCompletionMessageParam = { role: "user", content: "What is the weather in Oslo? [simulate:function]" };
    const first = await openai.chat.completions.create({ model: FLASH.model, messages: [question], tools: [WEATHER], tool_choice: "auto" });
    const [choice] = first.choices;
    assert.equal(choice!.finish_reason, "tool_calls");
    assert.equal(choice!.message.content, null);
    const [call] = choice!.message.tool_calls!;
    assert.equal(call!.type, "function");
    assert.ok(call!.id.length > 0);
    const fn = (call as OpenAI.ChatCompletionMessageFunctionToolCall).function;
    assert.equal(fn.name, "get_weather");
    assert.equal(typeof JSON.parse(fn.arguments).city, "string");
    // The declarations are prompt: more than the question's own tokens.
    assert.ok(first.usage!.prompt_tokens > tokensOf(question.content as string));
    const firstCharge = await statementCharge(service, customer.apiKey, before);
    assert.equal(firstCharge.charged, chargeOf(first.usage!));

    const between = await balanceOf(service, customer.apiKey);
    const second = await openai.chat.completions.create({
      model: FLASH.model, tools: [WEATHER],
      messages: [question, choice!.message, { role: "tool", tool_call_id: call!.id, content: JSON.stringify({ temperature_c: 14 }) }],
    });
    assert.equal(second.choices[0]!.finish_reason, "stop");
    assert.ok(second.choices[0]!.message.content!.length > 0);
    assert.equal(second.choices[0]!.message.tool_calls, undefined);
    const secondCharge = await statementCharge(service, customer.apiKey, between);
    assert.notEqual(secondCharge.entry.entry_id, firstCharge.entry.entry_id);
    assert.equal(secondCharge.charged, chargeOf(second.usage!));
  });

  it("when a streamed answer calls a tool, then a delta carries the whole call with its index, the finish reason is tool_calls, and the usage chunk is what is charged", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const stream = await openai.chat.completions.create({
      model: FLASH.model, messages: [{ role: "user", content: "Weather in Bergen? [simulate:function]" }], tools: [WEATHER],
      stream: true, stream_options: { include_usage: true },
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const calls = chunks.flatMap((c) => c.choices.flatMap((choice) => choice.delta.tool_calls ?? []));
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.index, 0);
    assert.equal(calls[0]!.function!.name, "get_weather");
    assert.equal(typeof JSON.parse(calls[0]!.function!.arguments!).city, "string");
    assert.deepEqual(chunks.flatMap((c) => c.choices.map((choice) => choice.finish_reason)).filter((f) => f !== null), ["tool_calls"]);
    const usage = chunks.at(-1)!.usage!;
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(usage));
  });

  it("when a json_schema response format is given, then the answer is a JSON instance of the schema, charged exactly", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const schema = { type: "object", properties: { colour: { type: "string" }, shades: { type: "integer" } }, required: ["colour", "shades"] };
    const completion = await openai.chat.completions.create({
      model: FLASH.model, messages: [{ role: "user", content: "Name a colour" }],
      response_format: { type: "json_schema", json_schema: { name: "colour", schema } },
    });
    const parsed = JSON.parse(completion.choices[0]!.message.content!);
    assert.equal(typeof parsed.colour, "string");
    assert.ok(Number.isInteger(parsed.shades));
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(completion.usage!));
  });

  it("when reasoning_effort asks for thinking, then reasoning_tokens reports it inside completion_tokens, and it is charged at the output price", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const completion = await openai.chat.completions.create({
      model: FLASH.model, messages: [{ role: "user", content: "Why is the sea salty?" }], reasoning_effort: "low",
    });
    const usage = completion.usage!;
    const reasoning = usage.completion_tokens_details!.reasoning_tokens!;
    assert.ok(reasoning > 0, "the model thought");
    assert.equal(usage.completion_tokens, tokensOf(completion.choices[0]!.message.content!) + reasoning);
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(usage));
  });

  it("when it generates two images as links, then each is a job charged the model's per-image price, and each link serves a PNG of the asked ratio", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const images = await openai.images.generate({ model: "aimodel-3-pro-image", prompt: "a lighthouse at dusk", n: 2, size: "1536x1024" });
    assert.equal(images.data!.length, 2);
    for (const image of images.data!) {
      const response = await fetch(image.url!);
      assert.equal(response.status, 200);
      const { width, height } = probePng(new Uint8Array(await response.arrayBuffer()));
      assert.equal(width, 2048, "1536 wide is within 2K");
      assert.ok(Math.abs(height - (width * 2) / 3) < 1, `3:2, got ${width}x${height}`);
    }
    const charges = await statementCharges(service, customer.apiKey, before, 2);
    for (const { charged, entry } of charges) {
      assert.equal(charged, pico(PRO_IMAGE_2K), "the 2K image price");
      assert.match(entry.job_id ?? "", /./, "charged as a job");
      assert.equal(entry.model, "aimodel-3-pro-image");
    }
  });

  it("when it asks for b64_json, then the image comes inline as base64 PNG, charged once", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const images = await openai.images.generate({ model: "aimodel-3-pro-image", prompt: "a harbour", size: "1024x1024", response_format: "b64_json" });
    const { width, height } = probePng(Buffer.from(images.data![0]!.b64_json!, "base64"));
    assert.equal(width, height);
    assert.equal(images.data![0]!.url, undefined);
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, pico(PRO_IMAGE_2K));
  });

  it("when an image's size has a ratio no model offers, n is above 4 or the model is a text model, then BadRequestError names the parameter, and nothing is held", async () => {
    const asker = await createCustomer(service, "1.00");
    const sdk = client(service, asker.apiKey);
    const size = await apiError(() => sdk.images.generate({ model: "aimodel-3-pro-image", prompt: "x", size: "1792x1024" }));
    assert.ok(size instanceof OpenAI.BadRequestError);
    const n = await apiError(() => sdk.images.generate({ model: "aimodel-3-pro-image", prompt: "x", n: 5 }));
    assert.deepEqual([n.status, n.param], [400, "n"]);
    const text = await apiError(() => sdk.images.generate({ model: FLASH.model, prompt: "x" }));
    assert.deepEqual([text.status, text.param, text.code], [400, "model", "unsupported_model"]);
    await assertUntouched(service, asker.apiKey, "1.00");
  });

  it("when it lists models, then models.list gives every text and image model in OpenAI's shape, and models.retrieve one of them", async () => {
    const ids: string[] = [];
    for await (const model of openai.models.list()) {
      assert.equal(model.object, "model");
      assert.equal(typeof model.created, "number");
      assert.equal(model.owned_by, "generation-service");
      ids.push(model.id);
    }
    assert.deepEqual(ids, LISTED_MODELS);
    const one = await openai.models.retrieve(FLASH.model);
    assert.deepEqual(one, { id: FLASH.model, object: "model", created: 0, owned_by: "generation-service" });
    const image = await openai.models.retrieve("aimodel-3-pro-image");
    assert.deepEqual(image, { id: "aimodel-3-pro-image", object: "model", created: 0, owned_by: "generation-service" });
    const missing = await apiError(() => openai.models.retrieve("videomodel-3.1-generate-001"));
    assert.ok(missing instanceof OpenAI.NotFoundError);
  });

  it("when the model is unknown, then the SDK raises NotFoundError, and nothing is held", async () => {
    const error = await apiError(() => openai.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] }));
    assert.ok(error instanceof OpenAI.NotFoundError);
    assert.equal(error.code, "unknown_model");
  });

  it("when the balance is zero, then the SDK raises APIError 402 insufficient_quota, unary and streamed, and nothing is held", async () => {
    const poor = await createCustomer(service, "0.00");
    const sdk = client(service, poor.apiKey);
    for (const stream of [false, true]) {
      const error = await apiError(async () => {
        const answer = await sdk.chat.completions.create({ model: FLASH.model, messages: [{ role: "user", content: "hello" }], stream });
        if (stream) for await (const _ of answer as AsyncIterable<unknown>);
      });
      assert.equal(error.status, 402, `stream: ${stream}`);
      assert.deepEqual([error.type, error.code, error.param], ["insufficient_quota", "insufficient_funds", null]);
      assert.match(error.message, /balance/);
    }
    await assertUntouched(service, poor.apiKey, "0.00");
  });

  it("when the key is wrong, then the SDK raises AuthenticationError 401, for completions and for models", async () => {
    const wrong = client(service, "sk_not-a-key");
    const error = await apiError(() => wrong.chat.completions.create({ model: FLASH.model, messages: [{ role: "user", content: "hello" }] }));
    assert.ok(error instanceof OpenAI.AuthenticationError);
    assert.equal(error.type, "authentication_error");
    assert.ok((await apiError(() => wrong.models.list())) instanceof OpenAI.AuthenticationError);
  });
});

describe("when OpenAI's JavaScript SDK calls through this service to an upstream speaking the vendor's API", () => {
  let stub: VendorStub;
  let service: TestService;
  let customer: Customer;
  let openai: OpenAI;
  before(async () => {
    stub = await startVendorStub();
    service = await startTestService({ VENDOR_BASE_URL: stub.url, VENDOR_API_KEY: stub.apiKey });
    customer = await createCustomer(service, "10.00");
    openai = client(service, customer.apiKey);
  });
  after(async () => {
    await service?.close();
    await stub?.close();
  });

  /** The body the upstream received for the newest call to `model`. */
  const upstreamBody = (model: string) => stub.requests.filter((r) => r.model === model).at(-1)!.body as Record<string, any>;

  it("when it asks for JSON mode, then the upstream is asked for application/json, and the upstream's usage is charged", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const prompt = "List three colours as JSON";
    const completion = await openai.chat.completions.create({
      model: FLASH.model, messages: [{ role: "developer", content: "Answer in JSON." }, { role: "user", content: prompt }],
      response_format: { type: "json_object" },
    });
    assert.equal(completion.choices[0]!.message.content, stubAnswer(prompt));
    const body = upstreamBody(FLASH.model);
    assert.equal(body.generationConfig.responseMimeType, "application/json");
    assert.deepEqual(body.systemInstruction, { parts: [{ text: "Answer in JSON." }] });
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(completion.usage!));
  });

  it("when it gives a json_schema response format, then the upstream gets the schema as responseJsonSchema, and exactly the usage is charged", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const schema = { type: "object", properties: { colour: { type: "string" } }, required: ["colour"] };
    const completion = await openai.chat.completions.create({
      model: FLASH.model, messages: [{ role: "user", content: "Name a colour" }],
      response_format: { type: "json_schema", json_schema: { name: "colour", schema } },
    });
    const body = upstreamBody(FLASH.model);
    assert.equal(body.generationConfig.responseMimeType, "application/json");
    assert.deepEqual(body.generationConfig.responseJsonSchema, schema);
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(completion.usage!));
  });

  it("when a thinking model answers with reasoning_effort, then thinking is asked for, reasoning_tokens reports it and it is charged as output", async () => {
    const pro = { model: "aimodel-3.1-pro-preview", input: "2.00", output: "12.00" };
    const before = await balanceOf(service, customer.apiKey);
    const completion = await openai.chat.completions.create({
      model: pro.model, messages: [{ role: "user", content: "Think about tides" }], reasoning_effort: "low",
    });
    assert.deepEqual(upstreamBody(pro.model).generationConfig.thinkingConfig, { thinkingLevel: "low" });
    const usage = completion.usage!;
    assert.equal(usage.completion_tokens_details?.reasoning_tokens, THOUGHTS_TOKENS);
    assert.equal(usage.completion_tokens, tokensOf(completion.choices[0]!.message.content!) + THOUGHTS_TOKENS);
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, tokenCharge(pro, usage.prompt_tokens, usage.completion_tokens));
  });
});
