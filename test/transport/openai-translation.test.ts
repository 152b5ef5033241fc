// backends: embedded
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { GenerateContentRequestSchema } from "../../gen/generation/v1/text_service_pb.js";
import { GatewayError } from "../../src/transport/http/gateway-error.js";
import { chatToVendor } from "../../src/transport/http/openai/chat-request.js";
import { ChatChunks, chatCompletion, finishReasonOf, type VendorAnswer } from "../../src/transport/http/openai/chat-response.js";

/**
 * The OpenAI ↔ vendor translation on its own, for what the simulated
 * provider cannot show end to end: tools in both directions, finish reasons,
 * thinking usage, and the refusals' parameters.
 */

const WEATHER = {
  type: "function",
  function: { name: "get_weather", description: "The weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
};

/** The refusal chatToVendor throws for `body`: its status, reason and parameter. */
function refusal(body: unknown): { status: number; reason: string; param: string | undefined } {
  try {
    chatToVendor(body);
  } catch (error) {
    assert.ok(error instanceof GatewayError, String(error));
    return { status: error.status, reason: error.reason, param: error.param };
  }
  return assert.fail("expected a refusal");
}

describe("OpenAI's chat request in the vendor's generateContent JSON", () => {
  it("when the messages have system, developer, user and assistant roles, then system and developer become systemInstruction and the rest contents", () => {
    const call = chatToVendor({
      model: "models/aimodel-3.5-flash",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "developer", content: [{ type: "text", text: "Use French." }] },
        { role: "user", content: "hi" },
        { role: "assistant", content: "salut" },
        { role: "user", content: [{ type: "text", text: "and?" }, { type: "image_url", image_url: { url: "data:image/PNG;base64,AAAA" } }] },
      ],
      max_tokens: 50, max_completion_tokens: 60, temperature: 0.5, top_p: 0.9, stop: "END", seed: 3, user: "ignored", store: false,
    });
    assert.equal(call.model, "aimodel-3.5-flash");
    assert.deepEqual(call.vendorRequest, {
      systemInstruction: { parts: [{ text: "Be brief." }, { text: "Use French." }] },
      contents: [
        { role: "user", parts: [{ text: "hi" }] },
        { role: "model", parts: [{ text: "salut" }] },
        { role: "user", parts: [{ text: "and?" }, { inlineData: { mimeType: "image/png", data: "AAAA" } }] },
      ],
      generationConfig: { maxOutputTokens: 60, temperature: 0.5, topP: 0.9, seed: 3, stopSequences: ["END"] },
    });
    assert.deepEqual([call.stream, call.includeUsage], [false, false]);
  });

  it("when tools, tool_choice, an assistant's tool_calls and the tools' answers come, then they become functionDeclarations, toolConfig, functionCall and one turn of functionResponse parts", () => {
    const call = chatToVendor({
      model: "aimodel-3.5-flash",
      tools: [WEATHER],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      messages: [
        { role: "user", content: "Weather in Oslo and Bergen?" },
        {
          role: "assistant", content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' }, extra_content: { google: { thought_signature: "c2ln" } } },
            { id: "call_2", type: "function", function: { name: "get_weather", arguments: '{"city":"Bergen"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: '{"temperature_c": 14}' },
        { role: "tool", tool_call_id: "call_2", content: "rain" },
      ],
    });
    assert.deepEqual(call.vendorRequest.tools, [{ functionDeclarations: [{ name: "get_weather", description: "The weather", parametersJsonSchema: WEATHER.function.parameters }] }]);
    assert.deepEqual(call.vendorRequest.toolConfig, { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["get_weather"] } });
    assert.deepEqual((call.vendorRequest.contents as unknown[]).slice(1), [
      {
        role: "model",
        parts: [
          { functionCall: { id: "call_1", name: "get_weather", args: { city: "Oslo" } }, thoughtSignature: "c2ln" },
          { functionCall: { id: "call_2", name: "get_weather", args: { city: "Bergen" } } },
        ],
      },
      {
        role: "user",
        parts: [
          { functionResponse: { id: "call_1", name: "get_weather", response: { temperature_c: 14 } } },
          { functionResponse: { id: "call_2", name: "get_weather", response: { output: "rain" } } },
        ],
      },
    ]);
    // The proto reads every part: the calls, their signature and the responses are carried, not dropped.
    const message = fromJson(GenerateContentRequestSchema, call.vendorRequest as JsonValue);
    assert.deepEqual(message.contents[1]!.parts.map((part) => part.data.case), ["functionCall", "functionCall"]);
    assert.equal(Buffer.from(message.contents[1]!.parts[0]!.thoughtSignature).toString(), "sig");
    assert.deepEqual(message.contents[2]!.parts.map((part) => part.data.case), ["functionResponse", "functionResponse"]);
    // An assistant turn sent back with `content: ""` beside its calls carries the calls alone.
    const resent = chatToVendor({
      model: "m",
      messages: [{ role: "assistant", content: "", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }] }],
    });
    assert.deepEqual(resent.vendorRequest.contents, [{ role: "model", parts: [{ functionCall: { id: "c", name: "f", args: {} } }] }]);
    for (const [choice, mode] of [["none", "NONE"], ["auto", "AUTO"], ["required", "ANY"]] as const) {
      const { vendorRequest } = chatToVendor({ model: "m", messages: [{ role: "user", content: "x" }], tools: [WEATHER], tool_choice: choice });
      assert.deepEqual(vendorRequest.toolConfig, { functionCallingConfig: { mode } });
    }
  });

  it("when response_format, reasoning_effort and stream_options come, then they become responseMimeType, responseJsonSchema, thinkingConfig and a usage chunk", () => {
    const schema = { type: "object", properties: { a: { type: "string" } } };
    const base = { model: "m", messages: [{ role: "user", content: "x" }] };
    assert.deepEqual(chatToVendor({ ...base, response_format: { type: "json_object" } }).vendorRequest.generationConfig, { responseMimeType: "application/json" });
    assert.deepEqual(
      chatToVendor({ ...base, response_format: { type: "json_schema", json_schema: { name: "a", schema, strict: true } } }).vendorRequest.generationConfig,
      { responseMimeType: "application/json", responseJsonSchema: schema },
    );
    assert.deepEqual(chatToVendor({ ...base, reasoning_effort: "none" }).vendorRequest.generationConfig, { thinkingConfig: { thinkingBudget: 0 } });
    assert.deepEqual(chatToVendor({ ...base, reasoning_effort: "high" }).vendorRequest.generationConfig, { thinkingConfig: { thinkingLevel: "high" } });
    const streamed = chatToVendor({ ...base, stream: true, stream_options: { include_usage: true }, n: 1 });
    assert.deepEqual([streamed.stream, streamed.includeUsage], [true, true]);
  });

  it("when the translation is read as the GenerateContentRequest message, then nothing of it is lost", () => {
    const { vendorRequest } = chatToVendor({
      model: "m", tools: [WEATHER], messages: [{ role: "system", content: "s" }, { role: "user", content: "x" }], response_format: { type: "json_object" },
    });
    const message = fromJson(GenerateContentRequestSchema, vendorRequest as JsonValue);
    assert.equal(message.systemInstruction?.parts[0]?.data.value, "s");
    assert.equal(message.generationConfig?.responseMimeType, "application/json");
    assert.equal(message.tools.length, 1);
  });

  it("when a parameter cannot be honoured, then the refusal is a 400 naming it", () => {
    const base = { model: "m", messages: [{ role: "user", content: "x" }] };
    assert.deepEqual(refusal({ ...base, n: 3 }), { status: 400, reason: "unsupported_parameter", param: "n" });
    assert.deepEqual(refusal({ ...base, frobnicate: true }), { status: 400, reason: "unknown_parameter", param: "frobnicate" });
    assert.deepEqual(refusal({ ...base, audio: { voice: "x" } }), { status: 400, reason: "unsupported_parameter", param: "audio" });
    assert.deepEqual(refusal({ ...base, logprobs: true }), { status: 400, reason: "unsupported_parameter", param: "logprobs" });
    assert.deepEqual(refusal({ ...base, reasoning_effort: "max" }).param, "reasoning_effort");
    assert.deepEqual(refusal({ ...base, stop: [1] }).param, "stop");
    assert.deepEqual(refusal({ ...base, tools: [{ type: "custom", custom: { name: "x" } }] }).param, "tools[0]");
    assert.deepEqual(refusal({ model: "m", messages: [{ role: "tool", tool_call_id: "nope", content: "x" }] }).param, "messages[0].tool_call_id");
    assert.deepEqual(refusal({ model: "m", messages: [{ role: "user", content: [{ type: "input_audio", input_audio: {} }] }] }).param, "messages[0].content[0]");
    assert.deepEqual(
      refusal({ model: "m", messages: [{ role: "assistant", tool_calls: [{ id: "a", type: "function", function: { name: "f", arguments: "[1]" } }] }] }).param,
      "messages[0].tool_calls[0].function.arguments",
    );
    assert.deepEqual(refusal({ model: "m", messages: [] }).param, "messages");
    assert.deepEqual(refusal({ model: "m", messages: [{ role: "narrator", content: "x" }] }).param, "messages[0].role");
  });
});

describe("the vendor's answer in OpenAI's chat completion shapes", () => {
  const call = (name: string, args: unknown, extra: Record<string, unknown> = {}) => ({ functionCall: { name, args, ...extra } });

  it("when the vendor's finish reasons come, then they map to stop, length, content_filter, and tool_calls when a function was called", () => {
    assert.equal(finishReasonOf("STOP", false), "stop");
    assert.equal(finishReasonOf("MAX_TOKENS", false), "length");
    for (const reason of ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII"]) assert.equal(finishReasonOf(reason, false), "content_filter");
    assert.equal(finishReasonOf("STOP", true), "tool_calls");
    assert.equal(finishReasonOf(undefined, false), undefined);
  });

  it("when the answer calls functions and thought, then the message has tool_calls with JSON arguments, and usage counts thinking as completion", () => {
    const answer: VendorAnswer = {
      candidates: [{
        content: { parts: [{ text: "hmm", thought: true }, { ...call("get_weather", { city: "Oslo" }, { id: "fc_1" }), thoughtSignature: "c2ln" }, call("noop", undefined)] },
        finishReason: "STOP",
      }],
      usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, thoughtsTokenCount: 7 },
    };
    const completion = chatCompletion(answer, "aimodel-3.5-flash", "chatcmpl-x", 1);
    const { message, finish_reason } = completion.choices[0]!;
    assert.equal(finish_reason, "tool_calls");
    assert.equal(message.content, null);
    const calls = message.tool_calls as { id: string; function: { name: string; arguments: string }; extra_content?: unknown }[];
    assert.deepEqual(calls[0], {
      id: "fc_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' }, extra_content: { google: { thought_signature: "c2ln" } },
    });
    assert.match(calls[1]!.id, /^call_/);
    assert.deepEqual(calls[1]!.function, { name: "noop", arguments: "{}" });
    assert.deepEqual(completion.usage, { prompt_tokens: 10, completion_tokens: 12, total_tokens: 22, completion_tokens_details: { reasoning_tokens: 7 } });
  });

  it("when a prompt is blocked, then the one choice is empty with finish_reason content_filter and zero usage", () => {
    const completion = chatCompletion({ promptFeedback: { blockReason: "SAFETY" }, usageMetadata: { promptTokenCount: 0, candidatesTokenCount: 0 } }, "m");
    assert.deepEqual(completion.choices[0]!.message, { role: "assistant", content: null, refusal: null });
    assert.equal(completion.choices[0]!.finish_reason, "content_filter");
    assert.equal(completion.usage.total_tokens, 0);
  });

  it("when a stream calls a function, then a delta carries the tool call with its index, the last chunk says tool_calls, and the usage chunk follows", () => {
    const chunks = new ChatChunks("m", true);
    const out = [
      ...chunks.next({ candidates: [{ content: { parts: [{ text: "Let me look. " }] } }], usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 3 } }),
      ...chunks.next({ candidates: [{ content: { parts: [call("get_weather", { city: "Oslo" }, { id: "fc_1" })] } }], usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 9 } }),
      ...chunks.next({ candidates: [{ finishReason: "STOP" }], usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 9 } }),
      ...chunks.end(),
    ] as { choices: { delta: Record<string, unknown>; finish_reason: string | null }[]; usage: unknown }[];
    assert.deepEqual(out.map((c) => c.choices[0]?.delta ?? null), [
      { role: "assistant", content: "" },
      { content: "Let me look. " },
      { tool_calls: [{ index: 0, id: "fc_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] },
      {},
      null,
    ]);
    assert.deepEqual(out.map((c) => (c.choices.length === 0 ? "no choice" : c.choices[0]!.finish_reason)), [null, null, null, "tool_calls", "no choice"]);
    assert.deepEqual(out.slice(0, -1).map((c) => c.usage), [null, null, null, null]);
    assert.deepEqual(out.at(-1)!.usage, { prompt_tokens: 4, completion_tokens: 9, total_tokens: 13, completion_tokens_details: { reasoning_tokens: 0 } });
  });
});
