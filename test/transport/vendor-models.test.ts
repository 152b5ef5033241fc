// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { call, createCustomer, startTestService, type Customer, type TestService } from "../support/harness.js";
import { assertVendorError } from "../support/jobs-api-helpers.js";
import { readSse, tokensOf, userTurn, VENDOR } from "../support/vendor-helpers.js";
import {
  assertUntouched, DEFAULT_INPUT_TOKEN_LIMIT, LISTED_MODELS, SPEC_IMAGE_MODELS, TEXT_MAX_OUTPUT_TOKENS,
} from "../support/vendor-sdk-helpers.js";

/*
 * What the vendor's SDKs need of the vendor surface besides generateContent,
 * on the wire: the key in `x-goog-api-key`, `models/{model}:countTokens`,
 * `GET models` (paged) and `GET models/{model}` in the vendor's shapes, under
 * both the vendor's version paths (v1beta and v1).
 */

const FLASH = "aimodel-3.5-flash";
const V1 = "/api/aimodel/v1";

/** A PNG header of the given size: all the counter reads of an image (text/media-tokens.ts). */
function pngHeader(width: number, height: number): string {
  const bytes = Buffer.alloc(33);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(bytes, 0);
  bytes.writeUInt32BE(13, 8);
  bytes.write("IHDR", 12, "latin1");
  bytes.writeUInt32BE(width, 16);
  bytes.writeUInt32BE(height, 20);
  return bytes.toString("base64");
}

function assertModelShape(model: any, id: string) {
  assert.deepEqual(Object.keys(model).sort(), [
    "baseModelId", "description", "displayName", "inputTokenLimit", "name", "outputTokenLimit", "supportedGenerationMethods", "version",
  ]);
  assert.equal(model.name, `models/${id}`);
  assert.equal(model.baseModelId, id);
  if (SPEC_IMAGE_MODELS.includes(id)) {
    // The image prompt limit (MAX_PROMPT_BYTES_IMAGE, 32 KiB) in tokens; no output token bound: the answer is an image.
    assert.equal(model.inputTokenLimit, (32 * 1024) / 4);
    assert.equal(model.outputTokenLimit, 0);
    assert.deepEqual(model.supportedGenerationMethods, ["generateContent", "streamGenerateContent"], "countTokens refuses image models");
  } else {
    assert.equal(model.inputTokenLimit, DEFAULT_INPUT_TOKEN_LIMIT);
    assert.equal(model.outputTokenLimit, TEXT_MAX_OUTPUT_TOKENS);
    assert.deepEqual(model.supportedGenerationMethods, ["generateContent", "streamGenerateContent", "countTokens"]);
  }
  assert.ok(model.displayName.length > 0 && model.description.length > 0 && model.version.length > 0);
}

describe("vendor surface: where the key comes from", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "10.00");
  });
  after(() => service.close());

  const routes = (prefix: string) => [
    { what: ":generateContent", method: "POST", path: `${prefix}/models/${FLASH}:generateContent`, body: userTurn("hi") },
    { what: ":streamGenerateContent", method: "POST", path: `${prefix}/models/${FLASH}:streamGenerateContent?alt=sse`, body: userTurn("hi") },
    { what: ":countTokens", method: "POST", path: `${prefix}/models/${FLASH}:countTokens`, body: userTurn("hi") },
    { what: "GET models", method: "GET", path: `${prefix}/models`, body: undefined },
    { what: "GET models/{model}", method: "GET", path: `${prefix}/models/${FLASH}`, body: undefined },
  ];
  const withQueryKey = (path: string, key: string) => `${path}${path.includes("?") ? "&" : "?"}key=${encodeURIComponent(key)}`;

  for (const prefix of [VENDOR, V1]) {
    it(`when the key comes in x-goog-api-key, x-vendor-api-key or ?key=, then every route under ${prefix} takes it`, async () => {
      for (const route of routes(prefix)) {
        const ways: [string, string, Record<string, string>][] = [
          ["x-goog-api-key", route.path, { "x-goog-api-key": customer.apiKey }],
          ["x-vendor-api-key", route.path, { "x-vendor-api-key": customer.apiKey }],
          ["?key=", withQueryKey(route.path, customer.apiKey), {}],
        ];
        for (const [way, path, headers] of ways) {
          const response = await call(service, route.method, path, { body: route.body, headers });
          assert.equal(response.status, 200, `${route.what} with the key in ${way}: ${response.text}`);
        }
      }
    });
  }

  it("when no key or a wrong one comes, then every route answers 401 UNAUTHENTICATED in the vendor's shape", async () => {
    for (const route of routes(VENDOR)) {
      assertVendorError(await call(service, route.method, route.path, { body: route.body }), 401, "UNAUTHENTICATED", "MISSING_API_KEY");
      const wrong = await call(service, route.method, route.path, { body: route.body, headers: { "x-goog-api-key": "sk_not-a-key" } });
      assertVendorError(wrong, 401, "UNAUTHENTICATED", "INVALID_API_KEY");
    }
  });

  it("when x-vendor-api-key and x-goog-api-key both come, then x-vendor-api-key is the one taken, then x-goog-api-key before ?key=", async () => {
    const path = `${VENDOR}/models`;
    const both = await call(service, "GET", path, { headers: { "x-vendor-api-key": customer.apiKey, "x-goog-api-key": "sk_not-a-key" } });
    assert.equal(both.status, 200, both.text);
    const wrongFirst = await call(service, "GET", path, { headers: { "x-vendor-api-key": "sk_not-a-key", "x-goog-api-key": customer.apiKey } });
    assertVendorError(wrongFirst, 401, "UNAUTHENTICATED", "INVALID_API_KEY");
    const headerOverQuery = await call(service, "GET", withQueryKey(path, "sk_not-a-key"), { headers: { "x-goog-api-key": customer.apiKey } });
    assert.equal(headerOverQuery.status, 200, headerOverQuery.text);
  });
});

describe("vendor surface: GET models and GET models/{model}", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService({ MAX_PROMPT_BYTES_TEXT: "1MiB" });
    customer = await createCustomer(service, "10.00");
  });
  after(() => service.close());

  const list = (query = "", prefix = VENDOR) => call(service, "GET", `${prefix}/models${query}`, { vendorKey: customer.apiKey });

  it("when models are listed without pageSize, then every text model, then every image model, comes on one page in the vendor's Model shape, without nextPageToken", async () => {
    for (const prefix of [VENDOR, V1]) {
      const response = await list("", prefix);
      assert.equal(response.status, 200, response.text);
      assert.deepEqual(Object.keys(response.json), ["models"]);
      assert.deepEqual(response.json.models.map((m: { name: string }) => m.name), LISTED_MODELS.map((id) => `models/${id}`));
      response.json.models.forEach((model: unknown, i: number) => assertModelShape(model, LISTED_MODELS[i]!));
    }
  });

  it("when pageSize is 10, then a page of 10 with nextPageToken, and that token gives the last 3 without one", async () => {
    const first = await list("?pageSize=10");
    assert.equal(first.status, 200, first.text);
    assert.equal(first.json.models.length, 10);
    assert.equal(typeof first.json.nextPageToken, "string");
    const second = await list(`?pageSize=10&pageToken=${encodeURIComponent(first.json.nextPageToken)}`);
    assert.equal(second.status, 200, second.text);
    assert.equal(second.json.models.length, 3);
    assert.equal(second.json.nextPageToken, undefined);
    assert.deepEqual(
      [...first.json.models, ...second.json.models].map((m: { baseModelId: string }) => m.baseModelId),
      LISTED_MODELS,
    );
  });

  it("when pageSize is above the vendor's maximum of 1000, then it is taken as 1000", async () => {
    const response = await list("?pageSize=5000");
    assert.equal(response.status, 200, response.text);
    assert.equal(response.json.models.length, LISTED_MODELS.length);
  });

  it("when pageSize is negative or not a number, or pageToken is not one the service gave, then 400 INVALID_ARGUMENT", async () => {
    const negative = await list("?pageSize=-1");
    assertVendorError(negative, 400, "INVALID_ARGUMENT", "INVALID_PAGE_SIZE");
    assertVendorError(await list("?pageSize=many"), 400, "INVALID_ARGUMENT");
    assertVendorError(await list(`?pageSize=${2 ** 31}`), 400, "INVALID_ARGUMENT");
    assertVendorError(await list("?pageToken=bm9wZQ"), 400, "INVALID_ARGUMENT", "INVALID_PAGE_TOKEN");
  });

  it("when a text or image model is asked for, then GET models/{model} answers its Model resource, under v1beta and v1", async () => {
    for (const prefix of [VENDOR, V1]) {
      for (const id of [FLASH, "aimodel-omni-1.1-flash", "aimodel-3-pro-image"]) {
        const response = await call(service, "GET", `${prefix}/models/${id}`, { vendorKey: customer.apiKey });
        assert.equal(response.status, 200, response.text);
        assertModelShape(response.json, id);
      }
    }
  });

  it("when a video model or an unknown one is asked for, then 404 NOT_FOUND UNKNOWN_MODEL in the vendor's shape", async () => {
    for (const id of ["videomodel-3.1-generate-001", "aimodel-does-not-exist"]) {
      const response = await call(service, "GET", `${VENDOR}/models/${id}`, { vendorKey: customer.apiKey });
      assertVendorError(response, 404, "NOT_FOUND", "UNKNOWN_MODEL");
    }
  });

  it("when a GET names a method (models/{model}:generateContent), then it is no route: 404 NOT_FOUND, before the key is looked at", async () => {
    const response = await call(service, "GET", `${VENDOR}/models/${FLASH}:generateContent`);
    assertVendorError(response, 404, "NOT_FOUND", "NOT_FOUND");
  });
});

describe("vendor surface: POST models/{model}:countTokens", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "10.00");
  });
  after(() => service.close());

  const count = (body: unknown, { model = FLASH, key = customer.apiKey, prefix = VENDOR } = {}) =>
    call(service, "POST", `${prefix}/models/${model}:countTokens`, { headers: { "x-goog-api-key": key }, body });

  it("when contents are counted, then totalTokens and its TEXT detail are the promptTokenCount generateContent reports, and nothing is held", async () => {
    const counter = await createCustomer(service, "1.00");
    const body = { contents: [{ role: "user", parts: [{ text: "Wie viele Tokens hat dieser Satz? ✓" }] }, { role: "model", parts: [{ text: "Einige." }] }, { role: "user", parts: [{ text: "Genau?" }] }] };
    const counted = await count(body, { key: counter.apiKey });
    assert.equal(counted.status, 200, counted.text);
    assert.deepEqual(Object.keys(counted.json).sort(), ["promptTokensDetails", "totalTokens"]);
    assert.equal(counted.json.totalTokens, tokensOf("Wie viele Tokens hat dieser Satz? ✓\nEinige.\nGenau?"));
    assert.deepEqual(counted.json.promptTokensDetails, [{ modality: "TEXT", tokenCount: counted.json.totalTokens }]);
    await assertUntouched(service, counter.apiKey, "1.00");
    const generated = await call(service, "POST", `${VENDOR}/models/${FLASH}:generateContent`, { vendorKey: counter.apiKey, body });
    assert.equal(generated.status, 200, generated.text);
    assert.equal(generated.json.usageMetadata.promptTokenCount, counted.json.totalTokens);
  });

  it("when a whole generateContentRequest is counted, then its systemInstruction counts too, and the streamed answer reports the same prompt tokens", async () => {
    const request = { ...userTurn("Summarise the tides"), systemInstruction: { parts: [{ text: "Answer like a sailor." }] } };
    const counted = await count({ generateContentRequest: { model: `models/${FLASH}`, ...request } });
    assert.equal(counted.status, 200, counted.text);
    assert.equal(counted.json.totalTokens, tokensOf("Answer like a sailor.\nSummarise the tides"));
    const stream = await fetch(`${service.url}${VENDOR}/models/${FLASH}:streamGenerateContent?alt=sse`, {
      method: "POST", headers: { "x-goog-api-key": customer.apiKey, "content-type": "application/json" }, body: JSON.stringify(request),
    });
    const { chunks } = await readSse(stream);
    assert.equal(chunks.at(-1)!.usageMetadata!.promptTokenCount, counted.json.totalTokens);
  });

  it("when an inline image is counted, then an IMAGE detail counts it by the vendor's rule: 258 tokens a 768-pixel tile, at least 2240", async () => {
    const image = (width: number, height: number) => ({
      contents: [{ role: "user", parts: [{ text: "What is this?" }, { inlineData: { mimeType: "image/png", data: pngHeader(width, height) } }] }],
    });
    for (const [width, height, tokens] of [[300, 200, 2240], [2000, 2000, 9 * 258]] as const) {
      const counted = await count(image(width, height));
      assert.equal(counted.status, 200, counted.text);
      assert.deepEqual(counted.json.promptTokensDetails, [
        { modality: "TEXT", tokenCount: tokensOf("What is this?") },
        { modality: "IMAGE", tokenCount: tokens },
      ]);
      assert.equal(counted.json.totalTokens, tokensOf("What is this?") + tokens);
    }
  });

  it("when the balance is zero, then counting still answers: it costs nothing", async () => {
    const poor = await createCustomer(service, "0.00");
    const counted = await count(userTurn("free to count"), { key: poor.apiKey, prefix: V1 });
    assert.equal(counted.status, 200, counted.text);
    assert.equal(counted.json.totalTokens, tokensOf("free to count"));
    await assertUntouched(service, poor.apiKey, "0.00");
  });

  it("when the request is one generateContent would refuse, then countTokens refuses it the same way in the vendor's shape", async () => {
    const imageOnly = await createCustomer(service, "10.00", ["aimodel-3-pro-image"]);
    assertVendorError(await count(userTurn("hi"), { model: "aimodel-does-not-exist" }), 404, "NOT_FOUND", "UNKNOWN_MODEL");
    assertVendorError(await count(userTurn("hi"), { model: "aimodel-3-pro-image" }), 400, "INVALID_ARGUMENT", "UNSUPPORTED_MODEL");
    assertVendorError(await count({ contents: [] }), 400, "INVALID_ARGUMENT", "INVALID_CONTENTS");
    assertVendorError(await count(userTurn("hi"), { key: imageOnly.apiKey }), 403, "PERMISSION_DENIED", "MODEL_NOT_PERMITTED");
    const otherModel = await count({ generateContentRequest: { model: "models/aimodel-3.7-flash", ...userTurn("hi") } });
    assertVendorError(otherModel, 400, "INVALID_ARGUMENT", "MODEL_MISMATCH");
  });
});
