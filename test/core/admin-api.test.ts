// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ADMIN_TOKEN, call, createCustomer, startTestService, type ApiResponse, type TestService } from "../support/harness.js";

/** Spec 2.1, in its order, with the kind the decisions give each model. */
const CATALOG: [string, string][] = [
  ["aimodel-2.5-flash-image", "image"],
  ["aimodel-3.1-flash-image", "image"],
  ["aimodel-3-pro-image", "image"],
  ["aimodel-3.1-flash-lite-image", "image"],
  ["aimodel-nbx-2.1", "image"],
  ["aimodel-3-flash-preview", "text"],
  ["aimodel-3.1-flash-lite", "text"],
  ["aimodel-3.1-pro-preview", "text"],
  ["aimodel-3.5-flash", "text"],
  ["aimodel-3.5-flash-lite", "text"],
  ["aimodel-3.6-flash", "text"],
  ["aimodel-3.7-flash", "text"],
  ["videomodel-3.1-generate-001", "video"],
  ["aimodel-omni-1.1-flash", "multimodal_realtime"],
];
const FULL_RATIOS = ["1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9", "1:4", "4:1", "1:8", "8:1", "auto"];
const EXTREME_RATIOS = ["1:4", "4:1", "1:8", "8:1"];
const FAST_RATIOS = FULL_RATIOS.filter((r) => !EXTREME_RATIOS.includes(r));

function assertPlatformError(response: ApiResponse, status: number, code?: string) {
  assert.equal(response.status, status, response.text);
  assert.equal(typeof response.json?.error?.code, "string", `platform error shape in ${response.text}`);
  assert.match(response.json.error.code, /^[a-z][a-z0-9_]*$/);
  assert.equal(typeof response.json.error.message, "string");
  if (code) assert.equal(response.json.error.code, code);
}

const admin = (service: TestService, method: string, path: string, body?: unknown) =>
  call(service, method, path, body === undefined ? { admin: true } : { admin: true, body });

async function listModels(service: TestService) {
  const response = await call(service, "GET", "/api/v1/models");
  assert.equal(response.status, 200, response.text);
  return response.json as { models: any[]; aspect_ratios: string[] };
}

describe("admin API /admin/v1", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("creates an account with 201 and its balance fields", async () => {
    const response = await admin(service, "POST", "/admin/v1/accounts", { name: "acme", balance: "12.5" });
    assert.equal(response.status, 201, response.text);
    assert.equal(typeof response.json.account_id, "string");
    assert.ok(response.json.account_id.length > 0);
    assert.equal(response.json.name, "acme");
    assert.equal(response.json.balance, "12.50");
    assert.equal(response.json.reserved, "0.00");
    assert.equal(response.json.available, "12.50");
    assert.equal(response.json.currency, "USD");
    const again = await admin(service, "POST", "/admin/v1/accounts", { name: "acme", balance: "1.00" });
    assert.notEqual(again.json.account_id, response.json.account_id);
  });

  it("adds credits exactly and returns the balance object; GET balance agrees", async () => {
    const customer = await createCustomer(service, "10.00");
    const credited = await admin(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { amount: "0.000001" });
    assert.equal(credited.status, 200, credited.text);
    assert.deepEqual(credited.json, { balance: "10.000001", reserved: "0.00", available: "10.000001", currency: "USD" });
    const more = await admin(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { amount: "5.00" });
    assert.deepEqual(more.json, { balance: "15.000001", reserved: "0.00", available: "15.000001", currency: "USD" });
    const read = await admin(service, "GET", `/admin/v1/accounts/${customer.accountId}/balance`);
    assert.equal(read.status, 200, read.text);
    assert.deepEqual(read.json, more.json);
    const own = await call(service, "GET", "/api/v1/balance", { key: customer.apiKey });
    assert.deepEqual(own.json, more.json);
  });

  it("issues a key with 201 that works at once, and revokes it so that it is refused at once", async () => {
    const account = await admin(service, "POST", "/admin/v1/accounts", { name: "keys", balance: "1.00" });
    const accountId = account.json.account_id;
    const created = await admin(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { models: ["*", "aimodel-3.1-flash-lite-image"] });
    assert.equal(created.status, 201, created.text);
    assert.equal(typeof created.json.key_id, "string");
    assert.equal(typeof created.json.api_key, "string");
    assert.notEqual(created.json.api_key, created.json.key_id);
    assert.equal(created.json.account_id, accountId);
    assert.deepEqual(created.json.models, ["*", "aimodel-3.1-flash-lite-image"]);
    assert.equal((await call(service, "GET", "/api/v1/balance", { key: created.json.api_key })).status, 200);

    const revoked = await admin(service, "DELETE", `/admin/v1/keys/${created.json.key_id}`);
    assert.equal(revoked.status, 200, revoked.text);
    assert.deepEqual(revoked.json, { key_id: created.json.key_id, revoked: true });
    assertPlatformError(await call(service, "GET", "/api/v1/balance", { key: created.json.api_key }), 401);
    assert.equal((await call(service, "POST", "/api/aimodel/v1beta/models/aimodel-3.5-flash:generateContent", {
      vendorKey: created.json.api_key, body: { contents: [{ parts: [{ text: "hi" }] }] },
    })).status, 401);
    assertPlatformError(await admin(service, "DELETE", "/admin/v1/keys/key_does_not_exist"), 404);
  });

  it("never shows a key's secret again after creation", async () => {
    const customer = await createCustomer(service, "2.00");
    const second = await admin(service, "POST", `/admin/v1/accounts/${customer.accountId}/keys`, { models: ["aimodel-3.5-flash"] });
    assert.notEqual(second.json.api_key, customer.apiKey, "every key has its own secret");
    const answers = [
      await admin(service, "GET", `/admin/v1/accounts/${customer.accountId}/balance`),
      await admin(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { amount: "1.00" }),
      await admin(service, "PUT", `/admin/v1/accounts/${customer.accountId}/webhook`, { url: "https://example.com/hook" }),
      await admin(service, "GET", "/admin/v1/prices"),
      await call(service, "GET", "/api/v1/models"),
      await call(service, "GET", "/api/v1/balance", { key: customer.apiKey }),
      await admin(service, "DELETE", `/admin/v1/keys/${customer.keyId}`),
    ];
    for (const answer of answers) {
      assert.ok(answer.status < 300, answer.text);
      assert.ok(!answer.text.includes(customer.apiKey), `secret leaked in ${answer.text}`);
      assert.ok(!answer.text.includes(second.json.api_key), `secret leaked in ${answer.text}`);
    }
    // The key's read endpoint (issue 10: limits and spend) shows neither the secret nor its hash.
    const read = await admin(service, "GET", `/admin/v1/keys/${second.json.key_id}`);
    assert.equal(read.status, 200, read.text);
    assert.ok(!read.text.includes(second.json.api_key), `secret leaked in ${read.text}`);
    assert.ok(!/secret|hash/i.test(Object.keys(read.json).join(",")), `no secret field: ${read.text}`);
    assert.equal((await admin(service, "GET", `/admin/v1/accounts/${customer.accountId}/keys`)).status, 404);
  });

  it("sets the account webhook and returns its whsec_ signing secret", async () => {
    const customer = await createCustomer(service, "1.00");
    const response = await admin(service, "PUT", `/admin/v1/accounts/${customer.accountId}/webhook`, { url: "https://example.com/hooks/gen" });
    assert.equal(response.status, 200, response.text);
    assert.equal(response.json.url, "https://example.com/hooks/gen");
    assert.match(response.json.secret, /^whsec_[A-Za-z0-9+/]+=*$/);
    assertPlatformError(await admin(service, "PUT", `/admin/v1/accounts/${customer.accountId}/webhook`, { url: "ftp://example.com/x" }), 422);
  });

  it("pauses and resumes the whole project: paused requests get 503 with Retry-After", async () => {
    const customer = await createCustomer(service, "1.00");
    const job = { model: "aimodel-2.5-flash-image", prompt: "a kite", aspect_ratio: "1:1" };
    const paused = await admin(service, "PUT", "/admin/v1/pause", { paused: true });
    try {
      assert.equal(paused.status, 200, paused.text);
      assert.deepEqual(paused.json, { paused: true });
      const refused = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: job });
      assertPlatformError(refused, 503, "project_paused");
      assert.match(refused.headers.get("retry-after") ?? "", /^\d+$/);
    } finally {
      const resumed = await admin(service, "PUT", "/admin/v1/pause", { paused: false });
      assert.deepEqual(resumed.json, { paused: false });
    }
    assert.equal((await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: job })).status, 202);
    assertPlatformError(await admin(service, "PUT", "/admin/v1/pause", { paused: "yes" }), 422);
  });

  it("pauses one model: /api/v1/models shows paused: true, its requests get 503, others are served", async () => {
    const customer = await createCustomer(service, "1.00");
    const model = "aimodel-3.1-flash-image";
    const paused = await admin(service, "PUT", `/admin/v1/models/${model}/pause`, { paused: true });
    try {
      assert.equal(paused.status, 200, paused.text);
      assert.deepEqual(paused.json, { model, paused: true });
      const listed = await listModels(service);
      assert.equal(listed.models.find((m) => m.id === model).paused, true);
      assert.ok(listed.models.filter((m) => m.id !== model).every((m) => m.paused === false));
      const refused = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: { model, prompt: "a kite", aspect_ratio: "1:1" } });
      assertPlatformError(refused, 503, "model_paused");
      assert.match(refused.headers.get("retry-after") ?? "", /^\d+$/);
      const other = await call(service, "POST", "/api/v1/generations", {
        key: customer.apiKey, body: { model: "aimodel-2.5-flash-image", prompt: "a kite", aspect_ratio: "1:1" },
      });
      assert.equal(other.status, 202, other.text);
    } finally {
      const resumed = await admin(service, "PUT", `/admin/v1/models/${model}/pause`, { paused: false });
      assert.deepEqual(resumed.json, { model, paused: false });
    }
    assert.equal((await listModels(service)).models.find((m) => m.id === model).paused, false);
    assertPlatformError(await admin(service, "PUT", "/admin/v1/models/aimodel-nope/pause", { paused: true }), 404);
  });

  it("lists the prices of all 14 models with their defaults", async () => {
    const response = await admin(service, "GET", "/admin/v1/prices");
    assert.equal(response.status, 200, response.text);
    const byModel = new Map<string, any>(response.json.prices.map((p: { model: string }) => [p.model, p]));
    assert.deepEqual([...byModel.keys()].sort(), CATALOG.map(([id]) => id).sort());
    assert.equal(response.json.prices.length, 14);
    assert.deepEqual(byModel.get("aimodel-2.5-flash-image").per_image, { "1K": "0.039" });
    assert.deepEqual(byModel.get("aimodel-3.1-flash-image").per_image, { "1K": "0.067", "2K": "0.101", "4K": "0.151" });
    assert.deepEqual(byModel.get("aimodel-3-pro-image").per_image, { "1K": "0.134", "2K": "0.134", "4K": "0.24" });
    assert.deepEqual(byModel.get("aimodel-3.1-flash-lite-image").per_image, { "1K": "0.02" });
    assert.deepEqual(byModel.get("aimodel-nbx-2.1").per_image, { "1K": "0.05", "2K": "0.08", "4K": "0.12" });
    assert.equal(byModel.get("aimodel-3.5-flash").input_per_million_tokens, "0.30");
    assert.equal(byModel.get("aimodel-3.5-flash").output_per_million_tokens, "2.50");
    assert.equal(byModel.get("aimodel-3.1-pro-preview").input_per_million_tokens, "2.00");
    assert.equal(byModel.get("aimodel-3.1-pro-preview").output_per_million_tokens, "12.00");
    assert.deepEqual(byModel.get("videomodel-3.1-generate-001").per_second, { "720p": "0.40", "1080p": "0.40", "4k": "0.60" });
    const omni = byModel.get("aimodel-omni-1.1-flash");
    assert.deepEqual(
      [omni.input_per_million_tokens, omni.output_per_million_tokens, omni.video_output_per_million_tokens],
      ["0.50", "2.00", "12.00"],
    );
  });

  it("changes a text model's price with PUT, and /api/v1/models shows the new price", async () => {
    const response = await admin(service, "PUT", "/admin/v1/prices/aimodel-3.6-flash", { input_per_million_tokens: "0.35" });
    assert.equal(response.status, 200, response.text);
    assert.equal(response.json.model, "aimodel-3.6-flash");
    assert.equal(response.json.input_per_million_tokens, "0.35");
    assert.equal(response.json.output_per_million_tokens, "2.50", "a field left out keeps its value");
    const listed = (await listModels(service)).models.find((m) => m.id === "aimodel-3.6-flash");
    assert.equal(listed.price.input_per_million_tokens, "0.35");
    assert.equal(listed.price.output_per_million_tokens, "2.50");
    const prices = await admin(service, "GET", "/admin/v1/prices");
    assert.equal(prices.json.prices.find((p: { model: string }) => p.model === "aimodel-3.6-flash").input_per_million_tokens, "0.35");
  });

  it("changes one resolution's image price with PUT and keeps the other resolutions' prices", async () => {
    const response = await admin(service, "PUT", "/admin/v1/prices/aimodel-nbx-2.1", { per_image: { "1K": "0.055" } });
    assert.equal(response.status, 200, response.text);
    assert.equal(response.json.per_image["1K"], "0.055");
    const listed = (await listModels(service)).models.find((m) => m.id === "aimodel-nbx-2.1");
    assert.equal(listed.price.per_image["1K"], "0.055");
    // A user changing one figure expects the others to stay (the proto says fields left empty keep their value).
    assert.deepEqual(listed.price.per_image, { "1K": "0.055", "2K": "0.08", "4K": "0.12" });
  });

  it("rejects invalid prices with 422 and an unknown model's price with 404", async () => {
    for (const body of [{ input_per_million_tokens: "abc" }, { input_per_million_tokens: "-1" }, { per_image: { "8K": "1.00" } }]) {
      const model = "per_image" in body ? "aimodel-3-pro-image" : "aimodel-3.5-flash-lite";
      assertPlatformError(await admin(service, "PUT", `/admin/v1/prices/${model}`, body), 422);
    }
    assertPlatformError(await admin(service, "PUT", "/admin/v1/prices/aimodel-nope", { input_per_million_tokens: "1.00" }), 404);
    const unchanged = (await listModels(service)).models.find((m) => m.id === "aimodel-3.5-flash-lite");
    assert.equal(unchanged.price.input_per_million_tokens, "0.10");
  });

  it("answers an unknown account with 404 on every account endpoint", async () => {
    const missing = "acct_00000000000000000000000000000000";
    assertPlatformError(await admin(service, "POST", `/admin/v1/accounts/${missing}/credits`, { amount: "1.00" }), 404);
    assertPlatformError(await admin(service, "GET", `/admin/v1/accounts/${missing}/balance`), 404);
    assertPlatformError(await admin(service, "POST", `/admin/v1/accounts/${missing}/keys`, { models: ["*"] }), 404);
    assertPlatformError(await admin(service, "PUT", `/admin/v1/accounts/${missing}/webhook`, { url: "https://example.com/h" }), 404);
  });

  for (const amount of ["abc", "-1", "1.0000000000001"]) {
    it(`rejects the amount "${amount}" with 422 when crediting and when opening an account`, async () => {
      const customer = await createCustomer(service, "3.00");
      assertPlatformError(await admin(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { amount }), 422);
      assertPlatformError(await admin(service, "POST", "/admin/v1/accounts", { name: "bad", balance: amount }), 422);
      const read = await admin(service, "GET", `/admin/v1/accounts/${customer.accountId}/balance`);
      assert.equal(read.json.balance, "3.00");
    });
  }

  it("rejects a zero or missing credit amount with 422", async () => {
    const customer = await createCustomer(service, "3.00");
    assertPlatformError(await admin(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { amount: "0" }), 422);
    assertPlatformError(await admin(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, {}), 422);
  });

  it("rejects key creation with an unknown model, or no models, with 422", async () => {
    const customer = await createCustomer(service, "1.00");
    for (const models of [["aimodel-nope"], ["*", "aimodel-3.5-flash", "nope"], [], "*"]) {
      assertPlatformError(await admin(service, "POST", `/admin/v1/accounts/${customer.accountId}/keys`, { models }), 422);
    }
  });

  it("rejects malformed JSON with 400 invalid_json", async () => {
    const response = await call(service, "POST", "/admin/v1/accounts", {
      admin: true,
      rawBody: '{"name": ',
      headers: { "content-type": "application/json" },
    });
    assertPlatformError(response, 400, "invalid_json");
  });

  it("answers 401 on every endpoint without the admin token or with a wrong one, and changes nothing", async () => {
    const customer = await createCustomer(service, "4.00");
    const endpoints: [string, string, unknown][] = [
      ["POST", "/admin/v1/accounts", { name: "x", balance: "1.00" }],
      ["POST", `/admin/v1/accounts/${customer.accountId}/credits`, { amount: "1.00" }],
      ["GET", `/admin/v1/accounts/${customer.accountId}/balance`, undefined],
      ["POST", `/admin/v1/accounts/${customer.accountId}/keys`, { models: ["*"] }],
      ["DELETE", `/admin/v1/keys/${customer.keyId}`, undefined],
      ["PUT", `/admin/v1/accounts/${customer.accountId}/webhook`, { url: "https://example.com/h" }],
      ["PUT", "/admin/v1/pause", { paused: true }],
      ["PUT", "/admin/v1/models/aimodel-3.5-flash/pause", { paused: true }],
      ["GET", "/admin/v1/prices", undefined],
      ["PUT", "/admin/v1/prices/aimodel-3.5-flash", { input_per_million_tokens: "9.00" }],
    ];
    const credentials: (Record<string, string> | undefined)[] = [
      undefined,
      { authorization: `Bearer ${ADMIN_TOKEN}x` },
      { authorization: "Bearer wrong" },
      { authorization: ADMIN_TOKEN },
      { authorization: `Bearer ${customer.apiKey}` },
    ];
    for (const [method, path, body] of endpoints) {
      for (const headers of credentials) {
        const response = await call(service, method, path, { headers, ...(body === undefined ? {} : { body }) });
        assertPlatformError(response, 401);
        assert.equal(`${method} ${path} ${response.status}`, `${method} ${path} 401`);
      }
    }
    // None of the refused calls had an effect.
    assert.deepEqual((await call(service, "GET", "/api/v1/balance", { key: customer.apiKey })).json, {
      balance: "4.00", reserved: "0.00", available: "4.00", currency: "USD",
    });
    const flash = (await listModels(service)).models.find((m) => m.id === "aimodel-3.5-flash");
    assert.equal(flash.paused, false);
    assert.equal(flash.price.input_per_million_tokens, "0.30");
    const job = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey, body: { model: "aimodel-2.5-flash-image", prompt: "not paused", aspect_ratio: "1:1" },
    });
    assert.equal(job.status, 202, job.text);
  });
});

describe("model catalog GET /api/v1/models", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("lists all 14 models of spec 2.1 with their kinds, without authentication", async () => {
    const { models } = await listModels(service);
    assert.deepEqual(models.map((m) => [m.id, m.kind]), CATALOG);
    for (const model of models) {
      assert.equal(model.paused, false);
      assert.equal(typeof model.price, "object");
    }
  });

  it("publishes the full aspect-ratio set and the fast image model's subset without 1:4, 4:1, 1:8, 8:1", async () => {
    const { models, aspect_ratios } = await listModels(service);
    assert.deepEqual([...aspect_ratios].sort(), [...FULL_RATIOS].sort());
    const byId = new Map(models.map((m) => [m.id, m]));
    assert.deepEqual([...byId.get("aimodel-2.5-flash-image").aspect_ratios].sort(), [...FAST_RATIOS].sort());
    for (const id of ["aimodel-3.1-flash-image", "aimodel-3-pro-image", "aimodel-3.1-flash-lite-image", "aimodel-nbx-2.1"]) {
      assert.deepEqual([...byId.get(id).aspect_ratios].sort(), [...FULL_RATIOS].sort(), id);
    }
  });

  it("lists resolutions, -preview aliases, output-token bounds and video durations", async () => {
    const byId = new Map((await listModels(service)).models.map((m) => [m.id, m]));
    assert.deepEqual(byId.get("aimodel-2.5-flash-image").resolutions, ["1K"]);
    assert.deepEqual(byId.get("aimodel-3.1-flash-lite-image").resolutions, ["1K"]);
    for (const id of ["aimodel-3.1-flash-image", "aimodel-3-pro-image", "aimodel-nbx-2.1"]) {
      assert.deepEqual(byId.get(id).resolutions, ["1K", "2K", "4K"], id);
    }
    assert.deepEqual(byId.get("videomodel-3.1-generate-001").resolutions, ["720p", "1080p", "4k"]);
    for (const id of ["aimodel-2.5-flash-image", "aimodel-3.1-flash-image", "aimodel-3-pro-image"]) {
      assert.deepEqual(byId.get(id).aliases, [`${id}-preview`]);
    }
    assert.deepEqual(byId.get("aimodel-3.1-flash-lite-image").aliases, []);
    assert.deepEqual(byId.get("aimodel-nbx-2.1").aliases, []);
    for (const [id, kind] of CATALOG) {
      if (kind === "text") assert.equal(byId.get(id).max_output_tokens, 8192, id);
    }
    assert.deepEqual(byId.get("videomodel-3.1-generate-001").durations_seconds, [4, 5, 6, 7, 8]);
    assert.equal(byId.get("aimodel-3.5-flash").price.output_per_million_tokens, "2.50");
    assert.deepEqual(byId.get("videomodel-3.1-generate-001").price.per_second, { "720p": "0.40", "1080p": "0.40", "4k": "0.60" });
  });
});

describe("admin money fields: strict decimals, bounds, the field named (issue 8)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  const NOT_STRICT = [" 5 ", "\t5\n", "+5", "5e3", "1E2", "05", "00.5", "1.", ".5", "1,5", "-1", "1.0000000000001"];
  const TOO_LARGE = ["1000000000.000000000001", "1000000001", `1${"0".repeat(30)}`];

  it("when a credit or an opening balance is not a strict decimal, then 422 invalid_amount naming the field, and nothing changes", async () => {
    const customer = await createCustomer(service, "3.00");
    for (const value of NOT_STRICT) {
      const credit = await admin(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { amount: value });
      assertPlatformError(credit, 422, "invalid_amount");
      assert.match(credit.json.error.message, /^amount must be a decimal string such as "10\.50"/, JSON.stringify(value));
      const opened = await admin(service, "POST", "/admin/v1/accounts", { name: "bad", balance: value });
      assertPlatformError(opened, 422, "invalid_amount");
      assert.match(opened.json.error.message, /^balance must be a decimal string such as "10\.50"/, JSON.stringify(value));
    }
    assert.equal((await admin(service, "GET", `/admin/v1/accounts/${customer.accountId}/balance`)).json.balance, "3.00");
  });

  it("when a credit or an opening balance is over 1 000 000 000.00, then 422 naming the field and the bound; at the bound, accepted", async () => {
    const customer = await createCustomer(service, "0");
    for (const value of TOO_LARGE) {
      const credit = await admin(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { amount: value });
      assertPlatformError(credit, 422, "invalid_amount");
      assert.equal(credit.json.error.message, "amount must be at most 1000000000.00");
      const opened = await admin(service, "POST", "/admin/v1/accounts", { name: "big", balance: value });
      assertPlatformError(opened, 422, "invalid_amount");
      assert.equal(opened.json.error.message, "balance must be at most 1000000000.00");
    }
    assert.equal((await admin(service, "GET", `/admin/v1/accounts/${customer.accountId}/balance`)).json.balance, "0.00");
    const credited = await admin(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { amount: "1000000000" });
    assert.equal(credited.status, 200, credited.text);
    assert.equal(credited.json.balance, "1000000000.00");
    const opened = await admin(service, "POST", "/admin/v1/accounts", { name: "big", balance: "1000000000.000000000000" });
    assert.equal(opened.status, 201, opened.text);
    assert.equal(opened.json.balance, "1000000000.00");
  });

  it("when a credit would take the balance over 1 000 000 000 000.00, then 422 balance_limit_exceeded; exactly to it, accepted", async () => {
    const opened = await admin(service, "POST", "/admin/v1/accounts", { name: "whale", balance: "999999999.999999999999" });
    const accountId = opened.json.account_id;
    const credit = (amount: string) => admin(service, "POST", `/admin/v1/accounts/${accountId}/credits`, { amount });
    for (let i = 0; i < 999; i++) assert.equal((await credit("1000000000")).status, 200);
    const over = await credit("0.000000000002");
    assertPlatformError(over, 422, "balance_limit_exceeded");
    assert.equal(over.json.error.message, "amount would take the balance to 1000000000000.000000000001; a balance may be at most 1000000000000.00");
    const at = await credit("0.000000000001");
    assert.equal(at.status, 200, at.text);
    assert.equal(at.json.balance, "1000000000000.00");
    assertPlatformError(await credit("0.000000000001"), 422, "balance_limit_exceeded");
    assert.equal((await admin(service, "GET", `/admin/v1/accounts/${accountId}/balance`)).json.balance, "1000000000000.00");
  });

  it("when a price figure is not a strict decimal or over 1 000 000.00, then 422 invalid_price naming the figure, and the price stays", async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ["aimodel-3.7-flash", { input_per_million_tokens: " 5 " }, /^input_per_million_tokens must be a decimal string/],
      ["aimodel-3.7-flash", { output_per_million_tokens: "+5" }, /^output_per_million_tokens must be a decimal string/],
      ["aimodel-3.7-flash", { input_per_million_tokens: "1000000.000001" }, /^input_per_million_tokens must be at most 1000000\.00$/],
      ["aimodel-omni-1.1-flash", { video_output_per_million_tokens: "1e3" }, /^video_output_per_million_tokens must be a decimal string/],
      ["aimodel-nbx-2.1", { per_image: { "1K": "0.05", "2K": "\t0.08\n" } }, /^per_image\.2K must be a decimal string/],
      ["aimodel-nbx-2.1", { per_image: { "4K": `1${"0".repeat(30)}` } }, /^per_image\.4K must be at most 1000000\.00$/],
      ["videomodel-3.1-generate-001", { per_second: { "720p": "00.40" } }, /^per_second\.720p must be a decimal string/],
    ];
    const before = (await admin(service, "GET", "/admin/v1/prices")).json;
    for (const [model, body, message] of cases) {
      const response = await admin(service, "PUT", `/admin/v1/prices/${model}`, body);
      assertPlatformError(response, 422, "invalid_price");
      assert.match(response.json.error.message, message);
    }
    assert.deepEqual((await admin(service, "GET", "/admin/v1/prices")).json, before);
    const atBound = await admin(service, "PUT", "/admin/v1/prices/aimodel-3.7-flash", { input_per_million_tokens: "1000000" });
    assert.equal(atBound.status, 200, atBound.text);
    assert.equal(atBound.json.input_per_million_tokens, "1000000.00");
  });
});
