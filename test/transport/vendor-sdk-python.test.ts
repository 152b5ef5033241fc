// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { balanceOf, createCustomer, eventually, pico, startTestService, type Customer, type TestService } from "../support/harness.js";
import { allEntries } from "../support/ledger-helpers.js";
import { tokenCharge, tokensOf } from "../support/vendor-helpers.js";
import {
  assertUntouched, DEFAULT_INPUT_TOKEN_LIMIT, FLASH, sdkBaseUrl, settledCharge, LISTED_MODELS, TEXT_MAX_OUTPUT_TOKENS,
} from "../support/vendor-sdk-helpers.js";
import { REPO_ROOT } from "../support/repo.js";
import { probePng } from "../support/media-probe.js";
import { assertImageCharged, assertNothingCharged, IMAGE_PRICES, pngSizeFor } from "../support/vendor-image-helpers.js";

const FLASH_IMAGE = "aimodel-3.1-flash-image";

/**
 * The vendor's official Python SDK (google-genai, from PyPI), configured as
 * its documentation says with nothing but a base URL and a key, against the
 * vendor surface. infra/python-sdk.sh installs it into .infra/python-sdk;
 * test/support/vendor_sdk_client.py is the user's program.
 */
const PYTHON = process.env.VENDOR_SDK_PYTHON ?? join(REPO_ROOT, ".infra/python-sdk/bin/python");
const CLIENT = join(REPO_ROOT, "test/support/vendor_sdk_client.py");
const installed = existsSync(PYTHON);
// CI installs the SDK (infra/python-sdk.sh): there a missing venv is a failure, not a skip.
if (!installed && process.env.CI) throw new Error(`the vendor's Python SDK is not installed at ${PYTHON}: run infra/python-sdk.sh`);
const skip = installed ? false : `the vendor's Python SDK is not installed (${PYTHON}): run infra/python-sdk.sh`;

const run = promisify(execFile);

/** Runs one scenario of vendor_sdk_client.py and returns what it printed, parsed. */
async function sdk(service: TestService, key: string, scenario: string, model: string, prompt = "", ...imageOptions: string[]): Promise<any> {
  // Only what the SDK's documentation configures: no vendor variables of the environment may steer it.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(GOOGLE|GEMINI)_/.test(name)));
  const { stdout } = await run(PYTHON, [CLIENT, scenario, model, prompt, ...imageOptions], {
    env: { ...env, VENDOR_SDK_BASE_URL: sdkBaseUrl(service), VENDOR_SDK_API_KEY: key },
    timeout: 120_000,
    // An image answer is printed whole (its PNG in base64).
    maxBuffer: 64 * 1024 * 1024,
  });
  return JSON.parse(stdout);
}

describe("when the vendor's Python SDK is given only this service's base URL and a key", { skip }, () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "10.00");
  });
  after(() => service?.close());

  it("when it calls generate_content, then it reads the answer and the usage, and exactly that usage is charged", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const prompt = "Décris un phare à Zürich ☕";
    const answer = await sdk(service, customer.apiKey, "unary", FLASH.model, prompt);
    assert.equal(answer.error, undefined, JSON.stringify(answer.error));
    assert.ok(answer.text.length > 0);
    assert.equal(answer.finish_reason, "STOP");
    assert.equal(answer.usage.prompt_token_count, tokensOf(prompt));
    assert.equal(answer.usage.candidates_token_count, tokensOf(answer.text));
    assert.equal(answer.usage.total_token_count, answer.usage.prompt_token_count + answer.usage.candidates_token_count);
    assert.equal(
      await settledCharge(service, customer.apiKey, before),
      tokenCharge(FLASH, answer.usage.prompt_token_count, answer.usage.candidates_token_count),
    );
  });

  it("when it streams with generate_content_stream, then the chunks join into the unary answer and the last one carries STOP and the final usage", async () => {
    const prompt = "write two sentences about lighthouses";
    const unary = await sdk(service, customer.apiKey, "unary", FLASH.model, prompt);
    const { chunks } = await sdk(service, customer.apiKey, "stream", FLASH.model, prompt);
    assert.ok(chunks.length >= 3, `several chunks, got ${chunks.length}`);
    assert.equal(chunks.map((c: { text: string | null }) => c.text ?? "").join(""), unary.text);
    const last = chunks.at(-1);
    assert.equal(last.finish_reason, "STOP");
    assert.deepEqual(last.usage, unary.usage);
  });

  it("when it chats with chats.create and send_message, then the second turn is sent with the first as history", async () => {
    const first = "Name a colour of the sea";
    const chat = await sdk(service, customer.apiKey, "chat", FLASH.model, first);
    assert.equal(chat.error, undefined, JSON.stringify(chat.error));
    const [one, two] = chat.answers;
    assert.deepEqual(chat.history.map((c: { role: string }) => c.role), ["user", "model", "user", "model"]);
    assert.deepEqual(chat.history.map((c: { text: string }) => c.text), [first, one.text, "And once more, shorter.", two.text]);
    // The simulated provider counts the whole conversation it was sent: the history came along.
    assert.equal(two.usage.prompt_token_count, tokensOf([first, one.text, "And once more, shorter."].join("\n")));
  });

  it("when it counts tokens, then count_tokens gives the prompt tokens generate_content reports, and nothing is charged", async () => {
    const counter = await createCustomer(service, "1.00");
    const prompt = "How many tokens is this sentence, exactly? ✓";
    const counted = await sdk(service, counter.apiKey, "count", FLASH.model, prompt);
    assert.equal(counted.total_tokens, tokensOf(prompt));
    await assertUntouched(service, counter.apiKey, "1.00");
    const answer = await sdk(service, counter.apiKey, "unary", FLASH.model, prompt);
    assert.equal(answer.usage.prompt_token_count, counted.total_tokens);
  });

  it("when it lists models with page_size 3, then it follows next_page_token through pages of 3, 3, 3, 3 and 1 and sees every text and image model once", async () => {
    const listed = await sdk(service, customer.apiKey, "list", "-", "3");
    assert.deepEqual(listed.pages.map((page: string[]) => page.length), [3, 3, 3, 3, 1]);
    const names = LISTED_MODELS.map((id) => `models/${id}`);
    assert.deepEqual(listed.pages.flat(), names);
    assert.deepEqual(listed.all, names);
  });

  it("when it gets a model, then models.get gives the vendor's Model fields", async () => {
    const model = await sdk(service, customer.apiKey, "get", FLASH.model);
    assert.equal(model.name, `models/${FLASH.model}`);
    assert.equal(model.display_name, "AIModel 3.5 Flash");
    assert.equal(typeof model.description, "string");
    assert.equal(model.version, "3.5");
    assert.equal(model.input_token_limit, DEFAULT_INPUT_TOKEN_LIMIT);
    assert.equal(model.output_token_limit, TEXT_MAX_OUTPUT_TOKENS);
    assert.deepEqual(model.supported_actions, ["generateContent", "streamGenerateContent", "countTokens"]);
  });

  it("when it gets a model that is neither a text nor an image model, then the SDK raises ClientError 404 NOT_FOUND", async () => {
    const { error } = await sdk(service, customer.apiKey, "get", "videomodel-3.1-generate-001");
    assert.deepEqual([error.class, error.code, error.status], ["ClientError", 404, "NOT_FOUND"]);
  });

  it("when it asks generate_content for TEXT and IMAGE at 9:16 and 2K, then the inline image is a 9:16 PNG beside the text, charged the 2K price", async () => {
    const buyer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, buyer.apiKey);
    const answer = await sdk(service, buyer.apiKey, "image", FLASH_IMAGE, "a tall lighthouse [simulate:with-text]", "9:16", "2K");
    assert.equal(answer.error, undefined, JSON.stringify(answer.error));
    assert.equal(answer.finish_reason, "STOP");
    assert.ok(answer.text.length > 0, "the provider's text part");
    assert.equal(answer.images.length, 1);
    assert.equal(answer.images[0].mime_type, "image/png");
    assert.deepEqual(probePng(Buffer.from(answer.images[0].data, "base64")), pngSizeFor("9:16", 2048));
    await assertImageCharged(service, buyer.apiKey, before, FLASH_IMAGE, IMAGE_PRICES[FLASH_IMAGE]!["2K"]!);
  });

  it("when it streams an image with generate_content_stream, then one chunk carries the PNG and STOP, charged the per-image price", async () => {
    const buyer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, buyer.apiKey);
    const { chunks, error } = await sdk(service, buyer.apiKey, "image_stream", FLASH_IMAGE, "a red kite", "1:1");
    assert.equal(error, undefined, JSON.stringify(error));
    const images = chunks.flatMap((chunk: { images: { data: string }[] }) => chunk.images);
    assert.equal(images.length, 1);
    assert.deepEqual(probePng(Buffer.from(images[0].data, "base64")), { width: 1024, height: 1024 });
    assert.equal(chunks.at(-1).finish_reason, "STOP");
    await assertImageCharged(service, buyer.apiKey, before, FLASH_IMAGE, IMAGE_PRICES[FLASH_IMAGE]!["1K"]!);
  });

  it("when the image's aspect ratio is not the model's, or the balance is zero, then ClientError 400 and 402, nothing held", async () => {
    const buyer = await createCustomer(service, "10.00");
    const wrong = await sdk(service, buyer.apiKey, "image", "aimodel-2.5-flash-image", "a wide view", "8:1");
    assert.deepEqual([wrong.error.class, wrong.error.code, wrong.error.status], ["ClientError", 400, "INVALID_ARGUMENT"]);
    assert.match(wrong.error.message, /aspectRatio "8:1"/);
    const poor = await createCustomer(service, "0.00");
    const broke = await sdk(service, poor.apiKey, "image", FLASH_IMAGE, "a view", "1:1");
    assert.deepEqual([broke.error.class, broke.error.code, broke.error.status], ["ClientError", 402, "RESOURCE_EXHAUSTED"]);
    await assertNothingCharged(service, buyer.apiKey, "10.00");
    await assertNothingCharged(service, poor.apiKey, "0.00");
  });

  it("when the prompt is blocked, then the SDK returns no text and no candidates, and prompt_feedback.block_reason SAFETY, uncharged", async () => {
    const blocked = await createCustomer(service, "1.00");
    const answer = await sdk(service, blocked.apiKey, "unary", FLASH.model, "tell me something [simulate:blocked]");
    assert.equal(answer.error, undefined, JSON.stringify(answer.error));
    assert.equal(answer.text, null);
    assert.equal(answer.candidates, 0);
    assert.equal(answer.block_reason, "SAFETY");
    await assertUntouched(service, blocked.apiKey, "1.00");
  });

  it("when the balance is zero, then the SDK raises ClientError 402 RESOURCE_EXHAUSTED naming INSUFFICIENT_FUNDS, and nothing is held", async () => {
    const poor = await createCustomer(service, "0.00");
    for (const scenario of ["unary", "stream"]) {
      const { error } = await sdk(service, poor.apiKey, scenario, FLASH.model, "hello");
      assert.deepEqual([error.class, error.code, error.status], ["ClientError", 402, "RESOURCE_EXHAUSTED"], scenario);
      assert.match(error.message, /balance/);
      assert.equal(error.details.error.details[0].reason, "INSUFFICIENT_FUNDS");
    }
    await assertUntouched(service, poor.apiKey, "0.00");
  });

  it("when the key is wrong, then the SDK raises ClientError 401 UNAUTHENTICATED", async () => {
    const { error } = await sdk(service, "sk_not-a-key", "unary", FLASH.model, "hello");
    assert.deepEqual([error.class, error.code, error.status], ["ClientError", 401, "UNAUTHENTICATED"]);
  });
});

describe("when the vendor's Python SDK uses function calling, safety settings, thinking and JSON answers", { skip }, () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service?.close());

  /** The statement's charges, oldest first, once nothing is held. */
  async function charges(apiKey: string) {
    await eventually(() => balanceOf(service, apiKey), (b) => b.reserved === "0.00", { what: "every hold to end" });
    const entries = (await allEntries(service, { key: apiKey })).filter((e) => e.type === "charge").reverse();
    return entries.map((e) => ({ amount: -pico(e.amount), prompt: e.prompt_token_count, output: e.candidates_token_count }));
  }
  const expected = (usage: { prompt_token_count: number; candidates_token_count: number; thoughts_token_count: number | null }) => {
    const output = usage.candidates_token_count + (usage.thoughts_token_count ?? 0);
    return { amount: tokenCharge(FLASH, usage.prompt_token_count, output), prompt: usage.prompt_token_count, output };
  };

  it("when it declares a function, gets the model's call and sends the function's response, then the final answer comes and both calls are charged exactly", async () => {
    const customer = await createCustomer(service, "10.00");
    const result = await sdk(service, customer.apiKey, "functions", FLASH.model, "Weather in Rome? [simulate:function]");
    assert.equal(result.error, undefined, JSON.stringify(result.error));
    const [first, second] = result.turns;
    const call = first.parts[0].function_call;
    assert.equal(call.name, "get_weather");
    assert.deepEqual(call.args, { city: "", unit: "celsius" });
    assert.equal(first.usage.candidates_token_count, tokensOf(JSON.stringify({ id: call.id, name: call.name, args: call.args })));
    assert.ok(first.usage.prompt_token_count > tokensOf("Weather in Rome? [simulate:function]") + 20, "the declarations are prompt tokens");
    assert.match(second.text, /^Simulated answer from aimodel-3\.5-flash/);
    assert.equal(second.parts.every((p: { function_call: unknown }) => p.function_call === null), true);
    assert.deepEqual(await charges(customer.apiKey), [expected(first.usage), expected(second.usage)]);
  });

  it("when it sends safety settings, then it is answered and charged by tokens as without them", async () => {
    const customer = await createCustomer(service, "10.00");
    const prompt = "Tell me about the sea";
    const safe = await sdk(service, customer.apiKey, "safety", FLASH.model, prompt);
    assert.equal(safe.error, undefined, JSON.stringify(safe.error));
    assert.equal(safe.usage.prompt_token_count, tokensOf(prompt));
    assert.equal(safe.usage.candidates_token_count, tokensOf(safe.text));
    assert.deepEqual(await charges(customer.apiKey), [expected(safe.usage)]);
  });

  it("when it thinks with a budget and no max_output_tokens, then the thought part comes first and its tokens are charged at the output price", async () => {
    const customer = await createCustomer(service, "10.00");
    const prompt = "Why do cats purr?";
    const answer = await sdk(service, customer.apiKey, "thinking", FLASH.model, prompt);
    assert.equal(answer.error, undefined, JSON.stringify(answer.error));
    const [thought, ...rest] = answer.parts;
    assert.equal(thought.thought, true);
    assert.equal(answer.usage.thoughts_token_count, tokensOf(thought.text));
    assert.equal(answer.usage.candidates_token_count, tokensOf(rest.map((p: { text: string }) => p.text).join("")));
    const [charged] = await charges(customer.apiKey);
    assert.deepEqual(charged, expected(answer.usage));
    assert.equal(charged!.amount, tokenCharge(FLASH, tokensOf(prompt), answer.usage.candidates_token_count + tokensOf(thought.text)));
  });

  it("when it asks for JSON with a response schema, then the text is a valid instance, charged exactly", async () => {
    const customer = await createCustomer(service, "10.00");
    const answer = await sdk(service, customer.apiKey, "json", FLASH.model, "A lighthouse as JSON");
    assert.equal(answer.error, undefined, JSON.stringify(answer.error));
    assert.deepEqual(JSON.parse(answer.text), { name: "", rank: 3 });
    assert.deepEqual(await charges(customer.apiKey), [expected(answer.usage)]);
  });
});
