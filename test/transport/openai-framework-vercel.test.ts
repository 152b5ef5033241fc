// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createOpenAICompatible, type OpenAICompatibleProvider } from "@ai-sdk/openai-compatible";
import { APICallError, generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { balanceOf, createCustomer, startTestService, type TestService } from "../support/harness.js";
import { openAiBaseUrl, statementCharge, statementCharges } from "../support/openai-helpers.js";
import { tokenCharge } from "../support/vendor-helpers.js";
import { assertUntouched, FLASH } from "../support/vendor-sdk-helpers.js";

/**
 * A popular framework on the OpenAI-compatible surface: the Vercel AI SDK's
 * OpenAI-compatible provider, given this service's OpenAI base URL and a key
 * (and its own switch for usage in streams), used as its documentation shows.
 */
const providerOf = (service: TestService, apiKey: string): OpenAICompatibleProvider =>
  createOpenAICompatible({ name: "generation-service", baseURL: openAiBaseUrl(service), apiKey, includeUsage: true });

describe("when the Vercel AI SDK's OpenAI-compatible provider is given this service's OpenAI base URL and a key", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service?.close());

  it("when it calls generateText, then it reads the answer and the usage, and exactly that usage is charged", async () => {
    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    const result = await generateText({ model: providerOf(service, customer.apiKey)(FLASH.model), prompt: "Name three lighthouses" });
    assert.ok(result.text.length > 0);
    assert.equal(result.finishReason, "stop");
    const { inputTokens, outputTokens } = result.usage;
    assert.ok(inputTokens! > 0 && outputTokens! > 0, JSON.stringify(result.usage));
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, tokenCharge(FLASH, inputTokens!, outputTokens!));
  });

  it("when it streams with streamText, then the text arrives in parts, the final usage is reported, and exactly that usage is charged", async () => {
    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    const result = streamText({ model: providerOf(service, customer.apiKey)(FLASH.model), prompt: "write two sentences about tides" });
    const parts: string[] = [];
    for await (const part of result.textStream) parts.push(part);
    assert.ok(parts.length >= 2, `several parts, got ${parts.length}`);
    const usage = await result.usage;
    assert.equal(parts.join(""), await result.text);
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, tokenCharge(FLASH, usage.inputTokens!, usage.outputTokens!));
  });

  it("when a tool is declared and the model calls it, then the framework runs it and sends its result back, and each of the two calls is charged exactly", async () => {
    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    const asked: unknown[] = [];
    const weather = tool({
      description: "The weather in a city",
      inputSchema: jsonSchema<{ city: string }>({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
      execute: async (input) => {
        asked.push(input);
        return { forecast: "sunny" };
      },
    });
    const result = await generateText({
      model: providerOf(service, customer.apiKey)(FLASH.model),
      prompt: "What is the weather in Zürich? [simulate:function]",
      tools: { weather },
      stopWhen: stepCountIs(2),
    });
    assert.equal(result.steps.length, 2, "a tool call, then the answer");
    assert.equal(result.steps[0]!.finishReason, "tool-calls");
    assert.equal(asked.length, 1, "the tool ran once");
    assert.equal(typeof (asked[0] as { city: unknown }).city, "string", "its arguments are an instance of its schema");
    const charges = await statementCharges(service, customer.apiKey, before, 2);
    const expected = result.steps.map((step) => tokenCharge(FLASH, step.usage.inputTokens!, step.usage.outputTokens!)).reverse();
    assert.deepEqual(charges.map(({ charged }) => charged), expected);
  });

  it("when the balance is zero, then the framework raises an APICallError 402 that it does not retry, and nothing is held", async () => {
    const poor = await createCustomer(service, "0.00");
    const error = await generateText({ model: providerOf(service, poor.apiKey)(FLASH.model), prompt: "hello", maxRetries: 0 }).then(
      () => assert.fail("expected an APICallError"),
      (thrown: unknown) => thrown,
    );
    assert.ok(APICallError.isInstance(error), String(error));
    assert.equal(error.statusCode, 402);
    assert.equal(error.isRetryable, false);
    await assertUntouched(service, poor.apiKey, "0.00");
  });
});
