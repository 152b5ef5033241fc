import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { findModel } from "../../../src/domain/catalog/models.js";
import { DomainError } from "../../../src/domain/errors/domain-error.js";
import { parseMoney } from "../../../src/domain/money.js";
import { tokenCost, tokenEstimate } from "../../../src/domain/pricing/quotes.js";
import { FUNCTION_CALLING_MODES } from "../../../src/domain/text/function-tools.js";
import { promptCount } from "../../../src/domain/text/prompt-count.js";
import { HARM_BLOCK_THRESHOLDS, safetySettingsUpstream } from "../../../src/domain/text/safety.js";
import { countTokens } from "../../../src/domain/text/tokens.js";
import { camelMembers, promptExtras, requestPromptExtras, upstreamTextBody } from "../../../src/domain/text/upstream-body.js";
import { DEFAULT_LIMITS } from "../../../src/domain/validation/limits.js";

const TEXT = findModel("aimodel-3.5-flash")!;
const contents = [{ role: "user", parts: [{ text: "What is the weather in Paris?" }] }];
const weather = { name: "get_weather", description: "Weather of a city", parameters: { type: "OBJECT", properties: { city: { type: "STRING" } }, required: ["city"] } };
const tools = [{ functionDeclarations: [weather] }];
const body = (request: Record<string, unknown>, minimums?: Record<string, string>) => upstreamTextBody(request, TEXT, 100, DEFAULT_LIMITS, minimums);

/** "field | message" of the refusal, or "accepted". */
function refused(work: () => unknown): string {
  try {
    work();
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    return `${error.reason} | ${error.facts.field} | ${error.message}`;
  }
  return "accepted";
}

describe("function calling in the upstream text body", () => {
  it("when function declarations and a tool config are sent, then they are forwarded as given and the declarations count as prompt", () => {
    const toolConfig = { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["get_weather"] } };
    const built = body({ contents, tools, toolConfig });
    assert.deepEqual(built.body, { contents, generationConfig: { maxOutputTokens: 100 }, tools, toolConfig });
    assert.equal(built.extraPromptTokens, countTokens(JSON.stringify(tools)));
    assert.equal(body({ contents, tools: [] }).extraPromptTokens, 0);
    assert.deepEqual(body({ contents, tools: [{}] }).body.tools, [{}]);
  });

  it("when a response schema, a JSON schema and declarations are sent together, then each counts as prompt", () => {
    const config = { responseSchema: { type: "string" }, responseJsonSchema: { type: "number" } };
    assert.equal(promptExtras(config, tools), 5 + countTokens('{"type":"number"}') + countTokens(JSON.stringify(tools)));
    assert.equal(promptExtras({}, undefined), 0);
    assert.equal(promptExtras({}, "tools"), 0);
  });

  it("when tools, toolConfig or thinkingConfig come in snake_case (as the vendor's Python SDK writes some), then they are read and forwarded in camelCase", () => {
    const snake = {
      contents,
      tools: [{ function_declarations: [{ name: "f", parameters_json_schema: { type: "object", properties: { a_b: {} } } }] }, { functionDeclarations: [] }],
      toolConfig: { function_calling_config: { mode: "ANY", allowed_function_names: ["f"] } },
      generationConfig: { thinkingConfig: { thinking_budget: 7, include_thoughts: true } },
    };
    const built = body(snake);
    assert.deepEqual(built.body.tools, [
      { functionDeclarations: [{ name: "f", parametersJsonSchema: { type: "object", properties: { a_b: {} } } }] }, { functionDeclarations: [] },
    ]);
    assert.deepEqual(built.body.toolConfig, { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["f"] } });
    assert.deepEqual((built.body.generationConfig as Record<string, unknown>).thinkingConfig, { thinkingBudget: 7, includeThoughts: true });
    assert.equal(built.thinkingTokens, 7);
    assert.equal(built.extraPromptTokens, requestPromptExtras(snake));
    assert.equal(requestPromptExtras(snake), countTokens(JSON.stringify(built.body.tools)));
    assert.equal(requestPromptExtras({ generationConfig: { responseSchema: { type: "string" } } }), 5);
    assert.equal(requestPromptExtras({ generationConfig: "x" }), 0);
    assert.equal(refused(() => body({ contents, tools: [{ google_search: {} }] })).split(" | ")[1], "tools[0].googleSearch");
    assert.equal(refused(() => body({ contents, tools: ["x"] })).split(" | ")[1], "tools[0]");
    assert.equal(refused(() => body({ contents, toolConfig: { mode: "x" } })).split(" | ")[1], "toolConfig.mode");
    assert.equal(refused(() => body({ contents, toolConfig: { function_calling_config: null } })).split(" | ")[1], "toolConfig.functionCallingConfig");
    assert.equal(refused(() => body({ contents, toolConfig: { other_thing: 1 } })).split(" | ")[1], "toolConfig.otherThing");
  });

  it("when a value is not an object, then camelMembers leaves it as it is; an object's own members only are renamed", () => {
    for (const value of [null, [], "a_b", 3]) assert.deepEqual(camelMembers(value), value);
    assert.deepEqual(camelMembers({ a_b: { c_d: 1 }, e: 2, f_g_h: 3 }), { aB: { c_d: 1 }, e: 2, fGH: 3 });
    assert.equal(refused(() => body({ contents, toolConfig: { retrieval_config: {} } })).split(" | ")[1], "toolConfig.retrievalConfig");
  });

  it("when a conversation replays a function call and its response, then the parts pass, role function included", () => {
    const replay = [
      ...contents,
      { role: "model", parts: [{ functionCall: { name: "get_weather", args: { city: "Paris" } }, thoughtSignature: "c2ln" }] },
      { role: "function", parts: [{ functionResponse: { name: "get_weather", response: { output: "sunny" } } }] },
      { role: "user", parts: [{ functionResponse: { id: "c1", name: "get_weather", response: {} } }, { text: "thanks", thought: false }] },
    ];
    assert.equal(refused(() => body({ contents: replay, tools })), "accepted");
    assert.equal(refused(() => body({ contents: [{ role: "tool", parts: [{ text: "x" }] }] })),
      "unsupported_field | contents[0].role | contents[0].role is not supported by this API: a content's role is \"user\", \"model\" or \"function\"");
    assert.equal(refused(() => body({ contents: [{ parts: [{ functionCall: "get_weather" }] }] })).split(" | ")[1], "contents[0].parts[0]");
    assert.equal(refused(() => body({ contents: [{ parts: [{ text: "a", videoMetadata: {} }] }] })),
      "unsupported_field | contents[0].parts[0].videoMetadata | contents[0].parts[0].videoMetadata is not supported by this API: not a part's field");
  });

  it("when a built-in tool is sent, then it is refused with 400 naming the tool", () => {
    for (const tool of ["googleSearch", "googleSearchRetrieval", "codeExecution", "urlContext", "googleMaps", "computerUse"]) {
      assert.equal(refused(() => body({ contents, tools: [{ functionDeclarations: [weather] }, { [tool]: {} }] })),
        `unsupported_field | tools[1].${tool} | tools[1].${tool} is not supported by this API: the built-in tool ${tool} is not offered; only functionDeclarations are`);
    }
  });

  it("when a built-in tool is priced, then it passes as declared, its price counted once per call; an unpriced one beside it is refused", () => {
    const prices = new Map([["googleSearch", parseMoney("0.035")], ["codeExecution", parseMoney("0.002")]]);
    const priced = (request: Record<string, unknown>) => upstreamTextBody({ contents, ...request }, TEXT, 100, DEFAULT_LIMITS, {}, prices);
    const tools = [{ googleSearch: {} }, { functionDeclarations: [weather], google_search: {} }, { codeExecution: {} }];
    const accepted = priced({ tools });
    assert.deepEqual(accepted.body.tools, [{ googleSearch: {} }, { functionDeclarations: [weather], googleSearch: {} }, { codeExecution: {} }]);
    assert.deepEqual(accepted.builtInTools, ["googleSearch", "codeExecution"]);
    assert.equal(accepted.toolFee, parseMoney("0.037"));
    assert.equal(priced({ tools: [{ functionDeclarations: [weather] }] }).toolFee, 0n);
    assert.equal(refused(() => priced({ tools: [{ googleSearch: {} }, { urlContext: {} }] })).split(" | ")[1], "tools[1].urlContext");
    assert.equal(refused(() => priced({ tools: [{ googleSearch: true }] })).split(" | ")[1], "tools[0].googleSearch");
  });

  it("when tools or declarations are malformed, then they are refused naming the field", () => {
    const field = (request: Record<string, unknown>) => refused(() => body({ contents, ...request })).split(" | ").slice(0, 2).join(" | ");
    const why = (request: Record<string, unknown>) => refused(() => body({ contents, ...request })).split(": ").slice(1).join(": ");
    assert.equal(field({ tools: {} }), "unsupported_field | tools");
    assert.equal(why({ tools: {} }), "expected a list of tools");
    assert.equal(field({ tools: ["x"] }), "unsupported_field | tools[0]");
    assert.equal(why({ tools: ["x"] }), "expected a tool object");
    assert.equal(field({ tools: [{ functionDeclarations: {} }] }), "unsupported_field | tools[0].functionDeclarations");
    assert.equal(why({ tools: [{ functionDeclarations: {} }] }), "expected a list of function declarations");
    assert.equal(field({ tools: [{ functionDeclarations: [null] }] }), "unsupported_field | tools[0].functionDeclarations[0]");
    assert.equal(why({ tools: [{ functionDeclarations: [null] }] }), "expected a function declaration");
    assert.equal(field({ tools: [{ functionDeclarations: [{ ...weather, strict: true }] }] }), "unsupported_field | tools[0].functionDeclarations[0].strict");
    assert.equal(why({ tools: [{ functionDeclarations: [{ ...weather, strict: true }] }] }), "not a function declaration's field");
    assert.equal(field({ tools: [{ functionDeclarations: [{ description: "no name" }] }] }), "unsupported_field | tools[0].functionDeclarations[0].name");
    assert.equal(why({ tools: [{ functionDeclarations: [{ description: "no name" }] }] }), "a declaration needs a name");
    assert.equal(field({ tools: [{ functionDeclarations: [{ name: "" }] }] }), "unsupported_field | tools[0].functionDeclarations[0].name");
    const every = { name: "f", description: "d", parameters: {}, parametersJsonSchema: {}, response: {}, responseJsonSchema: {}, behavior: "BLOCKING" };
    assert.equal(field({ tools: [{ functionDeclarations: [every] }] }), "accepted");
  });

  it("when the tool config is malformed or asks for more than function calling, then it is refused naming the field", () => {
    const field = (toolConfig: unknown) => refused(() => body({ contents, tools, toolConfig })).split(" | ").slice(0, 2).join(" | ");
    const why = (toolConfig: unknown) => refused(() => body({ contents, tools, toolConfig })).split(": ").slice(1).join(": ");
    assert.deepEqual([[], { retrievalConfig: {} }, { functionCallingConfig: 1 }, { functionCallingConfig: { other: 1 } }].map(why), [
      "expected an object", "only functionCallingConfig is offered", "expected an object", "not a function-calling option",
    ]);
    assert.equal(why({ functionCallingConfig: { mode: "X" } }), "expected one of MODE_UNSPECIFIED, AUTO, ANY, NONE, VALIDATED");
    assert.equal(why({ functionCallingConfig: { allowedFunctionNames: 1 } }), "expected a list of function names");
    assert.equal(field([]), "unsupported_field | toolConfig");
    assert.equal(field({ retrievalConfig: {} }), "unsupported_field | toolConfig.retrievalConfig");
    assert.equal(field({ functionCallingConfig: "ANY" }), "unsupported_field | toolConfig.functionCallingConfig");
    assert.equal(field({ functionCallingConfig: { mode: "SOMETIMES" } }), "unsupported_field | toolConfig.functionCallingConfig.mode");
    assert.equal(field({ functionCallingConfig: { mode: 1 } }), "unsupported_field | toolConfig.functionCallingConfig.mode");
    assert.equal(field({ functionCallingConfig: { allowedFunctionNames: "get_weather" } }), "unsupported_field | toolConfig.functionCallingConfig.allowedFunctionNames");
    assert.equal(field({ functionCallingConfig: { allowedFunctionNames: [1] } }), "unsupported_field | toolConfig.functionCallingConfig.allowedFunctionNames");
    assert.equal(field({ functionCallingConfig: { other: 1 } }), "unsupported_field | toolConfig.functionCallingConfig.other");
    for (const mode of FUNCTION_CALLING_MODES) assert.equal(field({ functionCallingConfig: { mode, allowedFunctionNames: [] } }), "accepted", mode);
    assert.equal(field({}), "accepted");
    assert.deepEqual([...FUNCTION_CALLING_MODES], ["MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"]);
  });

  it("when declarations or function parts make the forwarded request longer than the prompt limit, then 422 prompt_too_long", () => {
    const limits = { ...DEFAULT_LIMITS, maxPromptBytes: { ...DEFAULT_LIMITS.maxPromptBytes, text: 200 } };
    const big = [{ functionDeclarations: [{ name: "f", description: "d".repeat(200) }] }];
    assert.equal(refused(() => upstreamTextBody({ contents, tools: big }, TEXT, 10, limits)).split(" | ")[0], "prompt_too_long");
    const call = [{ role: "model", parts: [{ functionCall: { name: "f", args: { a: "x".repeat(200) } } }] }];
    assert.equal(refused(() => upstreamTextBody({ contents: call }, TEXT, 10, limits)).split(" | ")[0], "prompt_too_long");
    const response = [{ role: "user", parts: [{ functionResponse: { name: "f", response: { a: "x".repeat(200) } } }] }];
    assert.equal(refused(() => upstreamTextBody({ contents: response }, TEXT, 10, limits)).split(" | ")[0], "prompt_too_long");
    const small = [{ role: "user", parts: [{ functionResponse: { name: "f", response: { a: "x".repeat(100) } } }] }];
    assert.equal(refused(() => upstreamTextBody({ contents: small }, TEXT, 10, limits)), "accepted");
    const safety = Array.from({ length: 5 }, () => ({ category: "HARM_CATEGORY_HARASSMENT", threshold: "BLOCK_LOW_AND_ABOVE" }));
    assert.equal(refused(() => upstreamTextBody({ contents, safetySettings: safety }, TEXT, 10, limits)).split(" | ")[0], "prompt_too_long");
  });
});

describe("safety settings", () => {
  const harassment = (threshold: string) => ({ category: "HARM_CATEGORY_HARASSMENT", threshold });

  it("when no minimum is set, then the caller's settings pass as given, and none are invented", () => {
    const given = [harassment("BLOCK_NONE"), { category: "HARM_CATEGORY_HATE_SPEECH", threshold: "OFF", method: "SEVERITY" }];
    assert.deepEqual(body({ contents, safetySettings: given }).body.safetySettings, given);
    assert.equal(body({ contents }).body.safetySettings, undefined);
    assert.deepEqual(safetySettingsUpstream([]), []);
  });

  it("when the operator sets a minimum, then a looser threshold is raised to it, a stricter one kept, and a missing category added", () => {
    const minimums = { HARM_CATEGORY_HARASSMENT: "BLOCK_MEDIUM_AND_ABOVE", HARM_CATEGORY_DANGEROUS_CONTENT: "BLOCK_ONLY_HIGH" };
    for (const loose of ["HARM_BLOCK_THRESHOLD_UNSPECIFIED", "OFF", "BLOCK_NONE", "BLOCK_ONLY_HIGH"]) {
      assert.deepEqual(safetySettingsUpstream([harassment(loose)], minimums), [
        harassment("BLOCK_MEDIUM_AND_ABOVE"), { category: "HARM_CATEGORY_DANGEROUS_CONTENT", threshold: "BLOCK_ONLY_HIGH" },
      ], loose);
    }
    for (const strict of ["BLOCK_MEDIUM_AND_ABOVE", "BLOCK_LOW_AND_ABOVE"]) {
      assert.deepEqual(safetySettingsUpstream([harassment(strict)], minimums)![0], harassment(strict), strict);
    }
    assert.deepEqual(body({ contents }, minimums).body.safetySettings, [
      { category: "HARM_CATEGORY_HARASSMENT", threshold: "BLOCK_MEDIUM_AND_ABOVE" },
      { category: "HARM_CATEGORY_DANGEROUS_CONTENT", threshold: "BLOCK_ONLY_HIGH" },
    ]);
    const other = { category: "HARM_CATEGORY_CIVIC_INTEGRITY", threshold: "BLOCK_NONE" };
    assert.deepEqual(safetySettingsUpstream([other], { HARM_CATEGORY_HARASSMENT: "OFF" }), [other, harassment("OFF")]);
  });

  it("when a setting is malformed, then it is refused naming it", () => {
    const field = (safetySettings: unknown) => refused(() => body({ contents, safetySettings })).split(" | ").slice(0, 2).join(" | ");
    const why = (safetySettings: unknown) => refused(() => body({ contents, safetySettings })).split(": ").slice(1).join(": ");
    assert.deepEqual([{}, [null], [{ threshold: "OFF" }], [{ category: "C", threshold: "OFF", x: 1 }]].map(why), [
      "expected a list of {category, threshold}", "expected {category, threshold}", "expected a harm category", "not a safety setting's field",
    ]);
    assert.equal(why([harassment("X")]), `expected one of ${HARM_BLOCK_THRESHOLDS.join(", ")}`);
    assert.equal(field({}), "unsupported_field | safetySettings");
    assert.equal(field([null]), "unsupported_field | safetySettings[0]");
    assert.equal(field([[]]), "unsupported_field | safetySettings[0]");
    // A string or a number is not a setting, whatever its characters would be as keys.
    assert.equal(field(["BLOCK_NONE"]), "unsupported_field | safetySettings[0]");
    assert.equal(field([5]), "unsupported_field | safetySettings[0]");
    assert.equal(field([{ threshold: "OFF" }]), "unsupported_field | safetySettings[0].category");
    assert.equal(field([{ category: "HARM_CATEGORY_HARASSMENT" }]), "unsupported_field | safetySettings[0].threshold");
    assert.equal(field([harassment("BLOCK_SOME")]), "unsupported_field | safetySettings[0].threshold");
    assert.equal(field([{ ...harassment("OFF"), probability: "HIGH" }]), "unsupported_field | safetySettings[0].probability");
    assert.deepEqual([...HARM_BLOCK_THRESHOLDS], [
      "HARM_BLOCK_THRESHOLD_UNSPECIFIED", "OFF", "BLOCK_NONE", "BLOCK_ONLY_HIGH", "BLOCK_MEDIUM_AND_ABOVE", "BLOCK_LOW_AND_ABOVE",
    ]);
  });
});

describe("thinking and declarations in prices and counts", () => {
  const prices = { inputPerMillion: parseMoney("1.00"), outputPerMillion: parseMoney("10.00") };

  it("when thinking is reserved, then the estimate adds the budget at the output price to the allowance", () => {
    assert.equal(tokenEstimate("t", prices, 1_000_000, 1_000_000, 2_000_000), parseMoney("31.00"));
    assert.equal(tokenEstimate("t", prices, 0, 100), tokenEstimate("t", prices, 0, 100, 0));
    const video = { ...prices, videoOutputPerMillion: parseMoney("20.00") };
    assert.equal(tokenEstimate("t", video, 0, 1_000_000, 1_000_000), parseMoney("40.00"), "the whole bound at the dearest output price");
  });

  it("when an answer's usage has thought tokens, then they are output, charged at the output price and not twice", () => {
    const usage = { promptTokens: 1_000_000, textOutputTokens: 3_000_000, videoOutputTokens: 0, thoughtTokens: 2_000_000 };
    assert.equal(tokenCost("t", prices, usage), parseMoney("31.00"));
  });

  it("when countTokens counts a request with declarations, then they are TEXT tokens on top of the contents", () => {
    const count = promptCount({ promptTokens: 7, media: [] }, 5);
    assert.deepEqual(count, { totalTokens: 12, details: [{ modality: "TEXT", tokenCount: 12 }] });
    assert.equal(promptCount({ promptTokens: 7, media: [] }).totalTokens, 7);
  });
});
