// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { balanceOf, call, createCustomer, eventually, pico, startTestService, type TestService } from "../support/harness.js";
import {
  assertVendorError, chunkText, readSse, streamRequest, tokenCharge, tokensOf, userTurn, VENDOR, type StreamChunk,
} from "../support/vendor-helpers.js";

// Default prices of the decisions (per 1M tokens); the tests are the oracle, not the service's price file.
const FLASH = { model: "aimodel-3.5-flash", input: "0.30", output: "2.50" };
const OMNI = { model: "aimodel-omni-1.1-flash", input: "0.50", output: "2.00" };
const MODEL_MAX_OUTPUT_TOKENS = 8192;

const generate = (service: TestService, model: string, options: Parameters<typeof call>[3]) =>
  call(service, "POST", `${VENDOR}/models/${model}:generateContent`, options);

/** What the balance lost between two snapshots, once nothing is held any more. */
async function settledCharge(service: TestService, apiKey: string, before: { balance: string }) {
  const after = await eventually(() => balanceOf(service, apiKey), (b) => b.reserved === "0.00", { what: "reservation to clear" });
  assert.equal(pico(after.available), pico(after.balance) - pico(after.reserved));
  return pico(before.balance) - pico(after.balance);
}

function assertResponseShape(json: any) {
  assert.ok(Array.isArray(json.candidates) && json.candidates.length === 1, `one candidate in ${JSON.stringify(json)}`);
  const content = json.candidates[0].content;
  assert.equal(content.role, "model");
  assert.ok(Array.isArray(content.parts) && content.parts.length > 0);
  for (const part of content.parts) assert.equal(typeof part.text, "string");
  const usage = json.usageMetadata;
  for (const field of ["promptTokenCount", "candidatesTokenCount", "totalTokenCount"]) {
    assert.ok(Number.isInteger(usage[field]), `usageMetadata.${field} is an integer (${usage[field]})`);
  }
  assert.equal(usage.totalTokenCount, usage.promptTokenCount + usage.candidatesTokenCount);
}

describe("vendor text API: POST /api/aimodel/v1beta/models/{model}:generateContent", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("answers in the vendor format with token counts by the UTF-8 rule and charges exactly input×prompt + output×candidates", async () => {
    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    // Multi-byte characters make bytes ≠ characters, so the rule is really exercised.
    const prompt = "Décris un café à Zürich ☕ en trois phrases";
    const response = await generate(service, FLASH.model, { vendorKey: customer.apiKey, body: userTurn(prompt) });
    assert.equal(response.status, 200, response.text);
    assertResponseShape(response.json);
    const usage = response.json.usageMetadata;
    assert.equal(usage.promptTokenCount, tokensOf(prompt));
    const answer = response.json.candidates[0].content.parts.map((p: { text: string }) => p.text).join("");
    assert.ok(answer.length > 0);
    assert.equal(usage.candidatesTokenCount, tokensOf(answer));
    assert.equal(response.json.candidates[0].finishReason, "STOP");
    assert.equal(await settledCharge(service, customer.apiKey, before), tokenCharge(FLASH, usage.promptTokenCount, usage.candidatesTokenCount));
  });

  it("accepts snake_case request fields (generation_config.max_output_tokens)", async () => {
    const customer = await createCustomer(service, "10.00");
    const response = await generate(service, FLASH.model, {
      vendorKey: customer.apiKey,
      body: { contents: [{ role: "user", parts: [{ text: "tell me a long story" }] }], generation_config: { max_output_tokens: 5 } },
    });
    assert.equal(response.status, 200, response.text);
    assertResponseShape(response.json);
    assert.equal(response.json.candidates[0].finishReason, "MAX_TOKENS");
    assert.ok(response.json.usageMetadata.candidatesTokenCount <= 5, `≤ 5 tokens, got ${response.json.usageMetadata.candidatesTokenCount}`);
  });

  it("truncates at generationConfig.maxOutputTokens with finishReason MAX_TOKENS and charges only what was produced", async () => {
    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    const response = await generate(service, FLASH.model, {
      vendorKey: customer.apiKey,
      body: userTurn("tell me a long story", { generationConfig: { maxOutputTokens: 5 } }),
    });
    assert.equal(response.status, 200, response.text);
    assertResponseShape(response.json);
    const usage = response.json.usageMetadata;
    assert.equal(response.json.candidates[0].finishReason, "MAX_TOKENS");
    assert.ok(usage.candidatesTokenCount <= 5 && usage.candidatesTokenCount > 0, `1..5 tokens, got ${usage.candidatesTokenCount}`);
    assert.equal(await settledCharge(service, customer.apiKey, before), tokenCharge(FLASH, usage.promptTokenCount, usage.candidatesTokenCount));
  });

  it("serves the multimodal real-time model aimodel-omni-1.1-flash and charges its text-output price", async () => {
    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    const prompt = "summarise the plot of a short film";
    const response = await generate(service, OMNI.model, { vendorKey: customer.apiKey, body: userTurn(prompt) });
    assert.equal(response.status, 200, response.text);
    assertResponseShape(response.json);
    const usage = response.json.usageMetadata;
    assert.equal(usage.promptTokenCount, tokensOf(prompt));
    assert.equal(await settledCharge(service, customer.apiKey, before), tokenCharge(OMNI, usage.promptTokenCount, usage.candidatesTokenCount));
  });

  it("rejects an unknown model with 404 NOT_FOUND in the vendor error shape", async () => {
    const customer = await createCustomer(service, "10.00");
    const response = await generate(service, "aimodel-does-not-exist", { vendorKey: customer.apiKey, body: userTurn("hi") });
    assertVendorError(response, 404, "NOT_FOUND");
  });

  // Issue 38: an image model now answers through generateContent (vendor-images.test.ts); a video model is still refused.
  it("rejects a video model with 400 INVALID_ARGUMENT", async () => {
    const customer = await createCustomer(service, "10.00");
    const response = await generate(service, "videomodel-3.1-generate-001", { vendorKey: customer.apiKey, body: userTurn("a fox") });
    assertVendorError(response, 400, "INVALID_ARGUMENT");
  });

  it("rejects empty contents with 400 INVALID_ARGUMENT", async () => {
    const customer = await createCustomer(service, "10.00");
    const response = await generate(service, FLASH.model, { vendorKey: customer.apiKey, body: { contents: [] } });
    assertVendorError(response, 400, "INVALID_ARGUMENT");
    assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
  });

  it("rejects a request without x-vendor-api-key, or with a wrong one, with 401 UNAUTHENTICATED", async () => {
    assertVendorError(await generate(service, FLASH.model, { body: userTurn("hi") }), 401, "UNAUTHENTICATED");
    assertVendorError(await generate(service, FLASH.model, { vendorKey: "gsk_not-a-real-key", body: userTurn("hi") }), 401, "UNAUTHENTICATED");
  });

  it("rejects a call the balance cannot cover with 402 (the spec's insufficient funds on every surface), status RESOURCE_EXHAUSTED as the vendor words depleted credits, and holds nothing", async () => {
    const customer = await createCustomer(service, "0.00");
    const response = await generate(service, FLASH.model, { vendorKey: customer.apiKey, body: userTurn("hi") });
    assertVendorError(response, 402, "RESOURCE_EXHAUSTED");
    assert.equal(response.headers.get("retry-after"), null, "waiting does not help: no Retry-After");
    assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "0.00", reserved: "0.00", available: "0.00", currency: "USD" });
  });

  it("when a call would take the key past its spend limit, then it is 402 FAILED_PRECONDITION naming KEY_SPEND_LIMIT_EXCEEDED, and nothing is held", async () => {
    const customer = await createCustomer(service, "10.00");
    const created = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/keys`, {
      admin: true, body: { models: ["*"], spend_limit: "0.000001" },
    });
    assert.equal(created.status, 201, created.text);
    const limited = (created.json as { api_key: string }).api_key;
    const response = await generate(service, FLASH.model, { vendorKey: limited, body: userTurn("hi") });
    assertVendorError(response, 402, "FAILED_PRECONDITION");
    assert.equal(response.json.error.details[0].reason, "KEY_SPEND_LIMIT_EXCEEDED", response.text);
    assert.equal(response.headers.get("retry-after"), null, "waiting does not help: no Retry-After");
    assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
  });

  it("answers a paused model with 503 UNAVAILABLE and Retry-After, and serves it again once resumed", async () => {
    const customer = await createCustomer(service, "10.00");
    const model = "aimodel-3.7-flash";
    const pause = await call(service, "PUT", `/admin/v1/models/${model}/pause`, { admin: true, body: { paused: true } });
    assert.equal(pause.status, 200, pause.text);
    try {
      const response = await generate(service, model, { vendorKey: customer.apiKey, body: userTurn("hi") });
      assertVendorError(response, 503, "UNAVAILABLE");
      assert.match(response.headers.get("retry-after") ?? "", /^\d+$/);
      assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
    } finally {
      await call(service, "PUT", `/admin/v1/models/${model}/pause`, { admin: true, body: { paused: false } });
    }
    assert.equal((await generate(service, model, { vendorKey: customer.apiKey, body: userTurn("hi") })).status, 200);
  });

  it("rejects malformed JSON with 400 in the vendor error shape", async () => {
    const customer = await createCustomer(service, "10.00");
    const response = await generate(service, FLASH.model, {
      vendorKey: customer.apiKey,
      rawBody: '{"contents": [',
      headers: { "content-type": "application/json" },
    });
    assertVendorError(response, 400, "INVALID_ARGUMENT");
  });

  it("answers a blocked prompt with 200, promptFeedback.blockReason and no candidates, charging nothing", async () => {
    const customer = await createCustomer(service, "10.00");
    const response = await generate(service, FLASH.model, { vendorKey: customer.apiKey, body: userTurn("something [simulate:blocked]") });
    assert.equal(response.status, 200, response.text);
    assert.equal(response.json.promptFeedback?.blockReason, "SAFETY");
    assert.ok(response.json.candidates === undefined || response.json.candidates.length === 0, `no candidates in ${response.text}`);
    assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
  });
});

describe("vendor text API: POST :streamGenerateContent?alt=sse", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("streams several SSE chunks with cumulative usage, ends with STOP and the final counts, and the text equals the unary answer", async () => {
    const customer = await createCustomer(service, "10.00");
    const prompt = "write two sentences about lighthouses";
    const unary = await generate(service, FLASH.model, { vendorKey: customer.apiKey, body: userTurn(prompt) });
    assert.equal(unary.status, 200, unary.text);
    const expectedText = unary.json.candidates[0].content.parts.map((p: { text: string }) => p.text).join("");

    const before = await balanceOf(service, customer.apiKey);
    const response = await streamRequest(service, FLASH.model, userTurn(prompt), { key: customer.apiKey });
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
    // The head leaves with the first event: our time so far, and the wait for that event (the upstream's).
    assert.match(response.headers.get("server-timing") ?? "", /^gateway;dur=\d+\.\d\d, upstream;dur=\d+\.\d\d$/);
    const { chunks, events } = await readSse(response);

    assert.ok(chunks.length >= 3, `several chunks, got ${chunks.length}`);
    for (const event of events) assert.equal(event.event, undefined, "plain data: events, no event names");
    let previous = 0;
    for (const chunk of chunks) {
      assert.equal(chunk.candidates?.length, 1);
      assert.equal(chunk.candidates![0]!.content?.role, "model");
      for (const part of chunk.candidates![0]!.content!.parts!) assert.equal(typeof part.text, "string");
      const usage = chunk.usageMetadata!;
      assert.equal(usage.promptTokenCount, tokensOf(prompt));
      assert.ok(usage.candidatesTokenCount! >= previous, "usage is cumulative");
      assert.equal(usage.totalTokenCount, usage.promptTokenCount! + usage.candidatesTokenCount!);
      previous = usage.candidatesTokenCount!;
    }
    for (const chunk of chunks.slice(0, -1)) assert.ok(!chunk.candidates![0]!.finishReason, "only the last chunk has a finishReason");
    const last = chunks.at(-1)!;
    assert.equal(last.candidates![0]!.finishReason, "STOP");
    const text = chunks.map(chunkText).join("");
    assert.equal(text, expectedText);
    assert.deepEqual(
      { ...last.usageMetadata, promptTokensDetails: undefined, candidatesTokensDetails: undefined },
      { ...unary.json.usageMetadata, promptTokensDetails: undefined, candidatesTokensDetails: undefined },
    );
    assert.equal(
      await settledCharge(service, customer.apiKey, before),
      tokenCharge(FLASH, last.usageMetadata!.promptTokenCount!, last.usageMetadata!.candidatesTokenCount!),
    );
  });

  it("answers errors before the first chunk as plain HTTP errors in the vendor shape, not as a stream", async () => {
    const poor = await createCustomer(service, "0.00");
    const rich = await createCustomer(service, "10.00");
    const cases: [string, string | undefined, number, string][] = [
      [FLASH.model, undefined, 401, "UNAUTHENTICATED"],
      [FLASH.model, poor.apiKey, 402, "RESOURCE_EXHAUSTED"],
      ["aimodel-does-not-exist", rich.apiKey, 404, "NOT_FOUND"],
    ];
    for (const [model, key, status, canonical] of cases) {
      const response = await streamRequest(service, model, userTurn("hi"), key ? { key } : {});
      assert.doesNotMatch(response.headers.get("content-type") ?? "", /event-stream/);
      const text = await response.text();
      assertVendorError({ status: response.status, headers: response.headers, text, json: JSON.parse(text) }, status, canonical);
    }
    assert.deepEqual(await balanceOf(service, poor.apiKey), { balance: "0.00", reserved: "0.00", available: "0.00", currency: "USD" });
  });

  it("streams a blocked prompt as one chunk with promptFeedback and charges nothing", async () => {
    const customer = await createCustomer(service, "10.00");
    const response = await streamRequest(service, FLASH.model, userTurn("x [simulate:blocked]"), { key: customer.apiKey });
    assert.equal(response.status, 200);
    const { chunks } = await readSse(response);
    assert.ok(chunks.some((c) => c.promptFeedback?.blockReason === "SAFETY"), JSON.stringify(chunks));
    assert.ok(chunks.every((c) => !c.candidates?.length));
    assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
  });
});

describe("vendor text API: a client that aborts the stream", () => {
  let service: TestService;
  before(async () => {
    // A long latency spreads the chunks ~0.5 s apart, so an abort lands between them.
    service = await startTestService({ SIMULATED_LATENCY_MS: "3000" });
  });
  after(() => service.close());

  const prompt = "explain tides to a child";

  it("pays exactly for the chunks produced up to the abort once output began, and its hold is released", async () => {
    // Same prompt, same answer: the unaborted stream tells which cumulative counts a chunk can carry.
    const reference = await createCustomer(service, "10.00");
    const full = await readSse(await streamRequest(service, FLASH.model, userTurn(prompt), { key: reference.apiKey }));
    const possibleCounts = full.chunks.map((c) => c.usageMetadata!.candidatesTokenCount!);
    assert.ok(possibleCounts.length >= 3, `reference stream has several chunks: ${possibleCounts}`);

    const customer = await createCustomer(service, "10.00");
    const before = await balanceOf(service, customer.apiKey);
    const controller = new AbortController();
    const response = await streamRequest(service, FLASH.model, userTurn(prompt), { key: customer.apiKey, signal: controller.signal });
    assert.equal(response.status, 200);
    let first: StreamChunk | undefined;
    const read = await readSse(response, (chunk) => {
      first = chunk;
      controller.abort();
      return "stop";
    }).catch((error: Error) => {
      if (error.name !== "AbortError") throw error;
      return undefined;
    });
    assert.ok(first, "received a first chunk before aborting");
    assert.ok(!read || read.chunks.length === 1);
    const firstCount = first.usageMetadata!.candidatesTokenCount!;

    const charged = await settledCharge(service, customer.apiKey, before);
    const promptTokens = tokensOf(prompt);
    const estimate = tokenCharge(FLASH, promptTokens, MODEL_MAX_OUTPUT_TOKENS);
    assert.ok(charged > 0n, "output had begun, so something is owed");
    assert.ok(charged <= estimate, `charged ${charged} ≤ estimate ${estimate}`);
    const matching = possibleCounts.filter((k) => k >= firstCount && tokenCharge(FLASH, promptTokens, k) === charged);
    assert.ok(
      matching.length > 0,
      `charge ${charged} pico equals prompt + k output tokens for a chunk count k ≥ ${firstCount} among ${possibleCounts}`,
    );
    assert.ok(matching[0]! < possibleCounts.at(-1)!, "the abort stopped generation before the whole answer was billed");
  });

  it("pays nothing when it aborts before any output, and its hold is released", async () => {
    const customer = await createCustomer(service, "10.00");
    const controller = new AbortController();
    const pending = streamRequest(service, FLASH.model, userTurn(`${prompt} [simulate:slow]`), {
      key: customer.apiKey,
      signal: controller.signal,
    });
    pending.catch(() => {});
    // The service may hold the headers until the first chunk (so that early errors stay plain HTTP
    // errors); the client therefore aborts as soon as it sees either the headers or its hold placed.
    let headersArrived = false;
    const headers = pending.then(() => {
      headersArrived = true;
    }, () => {});
    await Promise.race([
      headers,
      eventually(() => balanceOf(service, customer.apiKey), (b) => pico(b.reserved) > 0n, { what: "the call's hold" }),
    ]);
    controller.abort();
    if (headersArrived) {
      const response = await pending;
      assert.equal(response.status, 200);
    }

    const after = await eventually(() => balanceOf(service, customer.apiKey), (b) => b.reserved === "0.00", { what: "hold released" });
    assert.deepEqual(after, { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
  });
});

describe("vendor surface edge cases", () => {
  let service: TestService;
  let key: string;
  before(async () => {
    service = await startTestService();
    key = (await createCustomer(service, "1.00")).apiKey;
  });
  after(() => service.close());

  it("answers streamGenerateContent without alt=sse as one JSON array of chunks, as the vendor does", async () => {
    const response = await call(service, "POST", "/api/aimodel/v1beta/models/aimodel-3.5-flash:streamGenerateContent", {
      vendorKey: key,
      body: { contents: [{ role: "user", parts: [{ text: "hello" }] }] },
    });
    assert.equal(response.status, 200);
    assert.ok(Array.isArray(response.json) && response.json.length > 1);
    const last = response.json[response.json.length - 1];
    assert.equal(last.candidates[0].finishReason, "STOP");
    assert.ok(last.usageMetadata.totalTokenCount > 0);
  });

  it("gives unknown routes under the vendor prefix the canonical NOT_FOUND status", async () => {
    const response = await call(service, "POST", "/api/aimodel/v1beta/models/aimodel-3.5-flash:embedContent", {
      vendorKey: key, body: { contents: [] },
    });
    assert.equal(response.status, 404);
    assert.equal(response.json.error.code, 404);
    assert.equal(response.json.error.status, "NOT_FOUND");
  });

  it("treats a missing model on the interactions endpoint as a validation failure (422 INVALID_ARGUMENT), not an unknown model", async () => {
    const response = await call(service, "POST", "/api/aimodel/v1beta/interactions", { vendorKey: key, body: { instances: [{ prompt: "a" }] } });
    assert.equal(response.status, 422);
    assert.equal(response.json.error.status, "INVALID_ARGUMENT");
  });

  it("reports no tokens for a refused prompt, since it is not charged", async () => {
    const response = await call(service, "POST", "/api/aimodel/v1beta/models/aimodel-3.5-flash:generateContent", {
      vendorKey: key, body: { contents: [{ role: "user", parts: [{ text: "[simulate:blocked] x" }] }] },
    });
    assert.equal(response.status, 200);
    assert.equal(response.json.promptFeedback.blockReason, "SAFETY");
    assert.equal(response.json.usageMetadata.totalTokenCount, 0);
  });

  it("refuses a body that is not sent as JSON with 415", async () => {
    const response = await call(service, "POST", "/api/v1/generations", {
      key, rawBody: JSON.stringify({ model: "aimodel-2.5-flash-image", prompt: "x" }), headers: { "content-type": "text/plain" },
    });
    assert.equal(response.status, 415);
    assert.equal(response.json.error.code, "unsupported_media_type");
  });
});
