// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ApiError, GoogleGenAI, type GenerateContentResponse } from "@google/genai";
import { balanceOf, call, createCustomer, eventually, pico, startTestService, type TestService } from "../support/harness.js";
import { allEntries } from "../support/ledger-helpers.js";
import { tokenCharge } from "../support/vendor-helpers.js";
import { startVendorStub, type VendorStub } from "../support/vendor-stub.js";
import { assertUntouched, FLASH, sdkBaseUrl } from "../support/vendor-sdk-helpers.js";

/**
 * The vendor's built-in tools priced by the operator: refused with 400 naming the tool until
 * PUT /admin/v1/prices/tools/{tool} prices it, then forwarded upstream, held and charged that
 * price once per call on top of the tokens, in the call's one charge entry; refused again once
 * the price is removed. Through the vendor's JavaScript SDK, against the vendor stub.
 */
const client = (service: TestService, apiKey: string) => new GoogleGenAI({ apiKey, httpOptions: { baseUrl: sdkBaseUrl(service) } });

const SEARCH_PRICE = "0.035";
const CODE_PRICE = "0.002";

/** The SDK's ApiError: the HTTP status, and the vendor's error body. */
async function apiError(work: () => Promise<unknown>): Promise<{ status: number; body: any }> {
  const error = await work().then(() => assert.fail("expected the SDK to throw an ApiError"), (thrown: unknown) => thrown);
  assert.ok(error instanceof ApiError, `an ApiError, got ${String(error)}`);
  return { status: error.status, body: JSON.parse(error.message) };
}

/** The charges of the account's statement, oldest first: amount charged and the tokens it names. */
async function charges(service: TestService, apiKey: string) {
  await eventually(() => balanceOf(service, apiKey), (b) => b.reserved === "0.00", { what: "every hold to end" });
  const entries = (await allEntries(service, { key: apiKey })).filter((e) => e.type === "charge").reverse();
  return entries.map((e) => ({ amount: -pico(e.amount), prompt: e.prompt_token_count, output: e.candidates_token_count }));
}

/** A call's charge: its tokens at the model's prices plus the tool's per-call price. */
function expectedCharge(response: GenerateContentResponse, toolPrice: string) {
  const usage = response.usageMetadata!;
  const output = (usage.candidatesTokenCount ?? 0) + (usage.thoughtsTokenCount ?? 0);
  return { amount: tokenCharge(FLASH, usage.promptTokenCount!, output) + pico(toolPrice), prompt: usage.promptTokenCount!, output };
}

const setToolPrice = (service: TestService, tool: string, perCall: string) =>
  call(service, "PUT", `/admin/v1/prices/tools/${tool}`, { admin: true, body: { per_call: perCall } });
const deleteToolPrice = (service: TestService, tool: string) => call(service, "DELETE", `/admin/v1/prices/tools/${tool}`, { admin: true });

describe("when the operator prices the vendor's built-in tools per call", () => {
  let stub: VendorStub;
  let service: TestService;
  before(async () => {
    stub = await startVendorStub();
    service = await startTestService({ VENDOR_BASE_URL: stub.url, VENDOR_API_KEY: stub.apiKey });
  });
  after(async () => {
    await service.close();
    await stub.close();
  });

  it("when a tool is not priced, then a call declaring it is refused with 400 naming it, nothing held, nothing sent upstream", async () => {
    const customer = await createCustomer(service, "10.00");
    const sent = stub.requests.length;
    const refused = await apiError(() =>
      client(service, customer.apiKey).models.generateContent({ model: FLASH.model, contents: "Who won?", config: { tools: [{ urlContext: {} }] } }),
    );
    assert.equal(refused.status, 400);
    assert.match(refused.body.error.message, /tools\[0\]\.urlContext/);
    assert.equal(stub.requests.length, sent, "nothing was sent upstream");
    await assertUntouched(service, customer.apiKey, "10.00");
  });

  it("when googleSearch is priced, then it is listed, forwarded upstream, and the call is charged its tokens plus the price in one entry", async () => {
    const priced = await setToolPrice(service, "googleSearch", SEARCH_PRICE);
    assert.equal(priced.status, 200, priced.text);
    assert.deepEqual(priced.json, { tool: "googleSearch", per_call: SEARCH_PRICE });
    const listed = await call(service, "GET", "/admin/v1/prices", { admin: true });
    assert.deepEqual(listed.json.tool_prices, [{ tool: "googleSearch", per_call: SEARCH_PRICE }]);
    assert.equal(listed.json.prices.length, 14, "the models' prices are listed as before");

    const customer = await createCustomer(service, "10.00");
    const ai = client(service, customer.apiKey);
    const response = await ai.models.generateContent({ model: FLASH.model, contents: "Who won the match yesterday?", config: { tools: [{ googleSearch: {} }] } });
    assert.ok(response.text && response.text.length > 0);
    const upstream = stub.requests.at(-1)!.body as { tools?: unknown };
    assert.deepEqual(upstream.tools, [{ googleSearch: {} }], "the tool is forwarded as declared");

    // Streamed, declaring the tool twice and a function beside it: the tool is charged once.
    const chunks: GenerateContentResponse[] = [];
    const tools = [{ googleSearch: {} }, { functionDeclarations: [{ name: "noop" }], googleSearch: {} }];
    for await (const chunk of await ai.models.generateContentStream({ model: FLASH.model, contents: "And today?", config: { tools } })) chunks.push(chunk);
    assert.ok(chunks.length > 0);
    assert.deepEqual(await charges(service, customer.apiKey), [expectedCharge(response, SEARCH_PRICE), expectedCharge(chunks.at(-1)!, SEARCH_PRICE)]);
  });

  it("when two priced tools are declared, then each one's price is charged once, with the tokens", async () => {
    assert.equal((await setToolPrice(service, "codeExecution", CODE_PRICE)).status, 200);
    assert.equal((await setToolPrice(service, "googleSearch", SEARCH_PRICE)).status, 200);
    const customer = await createCustomer(service, "10.00");
    const response = await client(service, customer.apiKey).models.generateContent({
      model: FLASH.model, contents: "Compute and search", config: { tools: [{ codeExecution: {} }, { googleSearch: {} }] },
    });
    const usage = response.usageMetadata!;
    const tokens = tokenCharge(FLASH, usage.promptTokenCount!, usage.candidatesTokenCount!);
    const [charged] = await charges(service, customer.apiKey);
    assert.equal(charged!.amount, tokens + pico(SEARCH_PRICE) + pico(CODE_PRICE));
    assert.deepEqual(await balanceOf(service, customer.apiKey), {
      balance: formatPico(pico("10.00") - charged!.amount), reserved: "0.00", available: formatPico(pico("10.00") - charged!.amount), currency: "USD",
    });
  });

  it("when the balance covers the tokens but not the tool's price, then the call is refused with 402 and nothing is charged", async () => {
    assert.equal((await setToolPrice(service, "googleMaps", "5.00")).status, 200);
    const customer = await createCustomer(service, "1.00");
    const ai = client(service, customer.apiKey);
    const config = { maxOutputTokens: 100 };
    const refused = await apiError(() => ai.models.generateContent({ model: FLASH.model, contents: "Where is it?", config: { ...config, tools: [{ googleMaps: {} }] } }));
    assert.equal(refused.status, 402);
    assert.equal(refused.body.error.status, "RESOURCE_EXHAUSTED");
    await assertUntouched(service, customer.apiKey, "1.00");
    const plain = await ai.models.generateContent({ model: FLASH.model, contents: "Where is it?", config });
    const usage = plain.usageMetadata!;
    assert.deepEqual(await charges(service, customer.apiKey), [
      { amount: tokenCharge(FLASH, usage.promptTokenCount!, usage.candidatesTokenCount!), prompt: usage.promptTokenCount!, output: usage.candidatesTokenCount! },
    ]);
  });

  it("when the price is removed, then the tool is refused again with 400 naming it, and it is no longer listed", async () => {
    assert.equal((await setToolPrice(service, "urlContext", "0.01")).status, 200);
    const customer = await createCustomer(service, "10.00");
    const ai = client(service, customer.apiKey);
    await ai.models.generateContent({ model: FLASH.model, contents: "Read it", config: { tools: [{ urlContext: {} }] } });
    const removed = await deleteToolPrice(service, "urlContext");
    assert.equal(removed.status, 200, removed.text);
    assert.deepEqual(removed.json, { tool: "urlContext", removed: true });
    assert.deepEqual((await deleteToolPrice(service, "urlContext")).json, { tool: "urlContext", removed: false });
    const listed = await call(service, "GET", "/admin/v1/prices", { admin: true });
    assert.ok(!listed.json.tool_prices.some((p: { tool: string }) => p.tool === "urlContext"));
    const [charged] = await charges(service, customer.apiKey);
    const refused = await apiError(() => ai.models.generateContent({ model: FLASH.model, contents: "Read it", config: { tools: [{ urlContext: {} }] } }));
    assert.equal(refused.status, 400);
    assert.match(refused.body.error.message, /tools\[0\]\.urlContext/);
    assert.deepEqual(await charges(service, customer.apiKey), [charged], "the refused call charged nothing");
  });

  it("when the operator names an unknown tool or a bad price, then 404 or 422, and nothing changes", async () => {
    const before = (await call(service, "GET", "/admin/v1/prices", { admin: true })).json;
    const unknown = await setToolPrice(service, "functionDeclarations", "0.01");
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(unknown.json.error.code, "unknown_tool");
    assert.equal((await deleteToolPrice(service, "webSearch")).status, 404);
    for (const bad of ["-1", "0.1e2", "abc", "2000000"]) {
      const response = await setToolPrice(service, "googleSearch", bad);
      assert.equal(response.status, 422, `${bad}: ${response.text}`);
      assert.equal(response.json.error.code, "invalid_price");
    }
    const missing = await call(service, "PUT", "/admin/v1/prices/tools/googleSearch", { admin: true, body: {} });
    assert.equal(missing.status, 422, missing.text);
    assert.equal((await call(service, "PUT", "/admin/v1/prices/tools/googleSearch", { body: { per_call: "1" } })).status, 401);
    assert.deepEqual((await call(service, "GET", "/admin/v1/prices", { admin: true })).json, before);
  });
});

/** Picodollars as the API's decimal string (at least two decimals, no trailing zeros beyond them). */
function formatPico(amount: bigint): string {
  const whole = amount / 10n ** 12n;
  let fraction = (amount % 10n ** 12n).toString().padStart(12, "0").replace(/0+$/, "");
  if (fraction.length < 2) fraction = fraction.padEnd(2, "0");
  return `${whole}.${fraction}`;
}
