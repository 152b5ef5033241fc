// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { balanceOf, createCustomer, pico, startTestService, type Customer, type TestService } from "../support/harness.js";
import { openAiBaseUrl, PNG_DATA_URI, statementCharge, statementCharges } from "../support/openai-helpers.js";
import { tokenCharge, tokensOf } from "../support/vendor-helpers.js";
import { assertUntouched, FLASH, LISTED_MODELS } from "../support/vendor-sdk-helpers.js";
import { startVendorStub, type VendorStub } from "../support/vendor-stub.js";
import { REPO_ROOT } from "../support/repo.js";
import { probePng } from "../support/media-probe.js";

/**
 * OpenAI's official Python SDK (openai, from PyPI), configured with nothing
 * but this service's OpenAI base URL and a key. infra/python-sdk.sh installs
 * it into .infra/python-sdk; test/support/openai_sdk_client.py is the user's program.
 */
const PYTHON = process.env.VENDOR_SDK_PYTHON ?? join(REPO_ROOT, ".infra/python-sdk/bin/python");
const CLIENT = join(REPO_ROOT, "test/support/openai_sdk_client.py");
const installed = existsSync(PYTHON);
// CI installs the SDK (infra/python-sdk.sh): there a missing venv is a failure, not a skip.
if (!installed && process.env.CI) throw new Error(`OpenAI's Python SDK is not installed at ${PYTHON}: run infra/python-sdk.sh`);
const skip = installed ? false : `OpenAI's Python SDK is not installed (${PYTHON}): run infra/python-sdk.sh`;

const run = promisify(execFile);

/** Runs one scenario of openai_sdk_client.py and returns what it printed, parsed. */
async function sdk(service: TestService, key: string, scenario: string, model: string, prompt = ""): Promise<any> {
  // Only what the SDK is given here: no OpenAI variables of the environment may steer it.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^OPENAI_/.test(name)));
  const { stdout } = await run(PYTHON, [CLIENT, scenario, model, prompt], {
    env: { ...env, OPENAI_SDK_BASE_URL: openAiBaseUrl(service), OPENAI_SDK_API_KEY: key },
    timeout: 120_000,
  });
  return JSON.parse(stdout);
}

const chargeOf = (usage: { prompt_tokens: number; completion_tokens: number }) => tokenCharge(FLASH, usage.prompt_tokens, usage.completion_tokens);

describe("when OpenAI's Python SDK is given only this service's OpenAI base URL and a key", { skip }, () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "10.00");
  });
  after(() => service?.close());

  it("when it creates a chat completion, then it reads the answer and the usage, and the statement charges exactly that usage", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const prompt = "Décris un phare à Zürich ☕";
    const answer = await sdk(service, customer.apiKey, "unary", FLASH.model, prompt);
    assert.equal(answer.error, undefined, JSON.stringify(answer.error));
    assert.match(answer.id, /^chatcmpl-/);
    assert.deepEqual([answer.object, answer.model, answer.finish_reason], ["chat.completion", FLASH.model, "stop"]);
    assert.equal(answer.usage.prompt_tokens, tokensOf(prompt));
    assert.equal(answer.usage.completion_tokens, tokensOf(answer.content));
    assert.equal(answer.usage.total_tokens, answer.usage.prompt_tokens + answer.usage.completion_tokens);
    assert.equal(answer.usage.reasoning_tokens, 0);
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(answer.usage));
  });

  it("when it streams with include_usage, then the deltas join into the unary answer and the final usage chunk is what is charged", async () => {
    const prompt = "write two sentences about lighthouses";
    const unary = await sdk(service, customer.apiKey, "unary", FLASH.model, prompt);
    const before = await balanceOf(service, customer.apiKey);
    const { chunks } = await sdk(service, customer.apiKey, "stream", FLASH.model, prompt);
    assert.ok(chunks.length >= 4, `several chunks, got ${chunks.length}`);
    assert.equal(chunks.flatMap((c: { content: (string | null)[] }) => c.content).join(""), unary.content);
    assert.deepEqual(chunks.flatMap((c: { finish_reason: (string | null)[] }) => c.finish_reason).filter(Boolean), ["stop"]);
    const last = chunks.at(-1);
    assert.deepEqual(last.content, []);
    assert.deepEqual(last.usage, unary.usage);
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(last.usage));
  });

  it("when a user message carries an image as a data URI, then the call is answered and exactly its usage is charged", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const answer = await sdk(service, customer.apiKey, "image", FLASH.model, "What is in this picture?");
    assert.equal(answer.error, undefined, JSON.stringify(answer.error));
    assert.equal(answer.finish_reason, "stop");
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(answer.usage));
  });

  it("when a user message carries an image as an http link to a loopback server, then the service fetches it once and exactly the usage is charged", async () => {
    const png = Buffer.from(PNG_DATA_URI.split(",")[1]!, "base64");
    let gets = 0;
    const images = createServer((_request, response) => {
      gets++;
      response.writeHead(200, { "content-type": "image/png" }).end(png);
    });
    await new Promise<void>((resolve) => images.listen(0, "127.0.0.1", resolve));
    try {
      const before = await balanceOf(service, customer.apiKey);
      const url = `http://127.0.0.1:${(images.address() as AddressInfo).port}/pixel.png`;
      const answer = await sdk(service, customer.apiKey, "image_link", FLASH.model, url);
      assert.equal(answer.error, undefined, JSON.stringify(answer.error));
      assert.deepEqual([answer.finish_reason, gets], ["stop", 1]);
      const inline = await sdk(service, customer.apiKey, "image", FLASH.model, "What is in this picture?");
      assert.equal(answer.usage.prompt_tokens, inline.usage.prompt_tokens, "the same image inline and by link: the same prompt");
      const [linked] = (await statementCharges(service, customer.apiKey, before, 2)).reverse();
      assert.equal(linked!.charged, chargeOf(answer.usage));
    } finally {
      images.closeAllConnections();
      await new Promise((resolve) => images.close(resolve));
    }
  });

  it("when the model calls a declared tool and the tool's answer is sent back, then the round trip completes and both calls are charged exactly", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const { first, second, error } = await sdk(service, customer.apiKey, "tools", FLASH.model, "What is the weather in Oslo? [simulate:function]");
    assert.equal(error, undefined, JSON.stringify(error));
    assert.equal(first.finish_reason, "tool_calls");
    assert.equal(first.tool_calls.length, 1);
    assert.equal(first.tool_calls[0].name, "get_weather");
    assert.equal(typeof JSON.parse(first.tool_calls[0].arguments).city, "string");
    assert.ok(second, "the second call was made with the tool's answer");
    assert.equal(second.finish_reason, "stop");
    assert.ok(second.content.length > 0);
    // Two calls, two entries in the statement: each exactly what its usage says.
    const charges = await statementCharges(service, customer.apiKey, before, 2);
    assert.deepEqual(charges.map(({ charged }) => charged), [chargeOf(second.usage), chargeOf(first.usage)]);
  });

  it("when it generates an image as b64_json, then a square PNG comes inline, charged the model's per-image price as a job", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const { images, error } = await sdk(service, customer.apiKey, "images", "aimodel-3-pro-image", "a lighthouse at dusk");
    assert.equal(error, undefined, JSON.stringify(error));
    assert.equal(images.length, 1);
    assert.equal(images[0].url, null);
    assert.deepEqual(probePng(Buffer.from(images[0].b64_json, "base64")), { width: 1024, height: 1024 });
    const { charged, entry } = await statementCharge(service, customer.apiKey, before);
    assert.equal(charged, pico("0.134"));
    assert.equal(entry.model, "aimodel-3-pro-image");
  });

  it("when it lists models, then models.list gives every text and image model in OpenAI's shape", async () => {
    const { models } = await sdk(service, customer.apiKey, "list", "-");
    assert.deepEqual(models.map((m: { id: string }) => m.id), LISTED_MODELS);
    assert.ok(models.every((m: { object: string; owned_by: string }) => m.object === "model" && m.owned_by === "generation-service"));
  });

  it("when the balance is zero, then the SDK raises APIStatusError 402 insufficient_quota, unary and streamed, and nothing is held", async () => {
    const poor = await createCustomer(service, "0.00");
    for (const scenario of ["unary", "stream"]) {
      const { error } = await sdk(service, poor.apiKey, scenario, FLASH.model, "hello");
      assert.deepEqual([error.class, error.status, error.type, error.code], ["APIStatusError", 402, "insufficient_quota", "insufficient_funds"], scenario);
      assert.match(error.message, /balance/);
    }
    await assertUntouched(service, poor.apiKey, "0.00");
  });

  it("when the key is wrong, then the SDK raises AuthenticationError 401", async () => {
    const { error } = await sdk(service, "sk_not-a-key", "unary", FLASH.model, "hello");
    assert.deepEqual([error.class, error.status, error.type], ["AuthenticationError", 401, "authentication_error"]);
  });
});

describe("when OpenAI's Python SDK asks for JSON mode through this service to an upstream speaking the vendor's API", { skip }, () => {
  let stub: VendorStub;
  let service: TestService;
  let customer: Customer;
  before(async () => {
    stub = await startVendorStub();
    service = await startTestService({ VENDOR_BASE_URL: stub.url, VENDOR_API_KEY: stub.apiKey });
    customer = await createCustomer(service, "10.00");
  });
  after(async () => {
    await service?.close();
    await stub?.close();
  });

  it("when response_format is json_object, then the upstream is asked for application/json, and exactly the usage is charged", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const answer = await sdk(service, customer.apiKey, "json", FLASH.model, "three colours as JSON");
    assert.equal(answer.error, undefined, JSON.stringify(answer.error));
    const body = stub.requests.filter((r) => r.model === FLASH.model).at(-1)!.body as { generationConfig: Record<string, unknown> };
    assert.equal(body.generationConfig.responseMimeType, "application/json");
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(answer.usage));
  });
});
