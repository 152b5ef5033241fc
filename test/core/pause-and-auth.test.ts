// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import {
  balanceOf, call, createCustomer, finishedJob, pico, startTestService, type ApiResponse, type TestService,
} from "../support/harness.js";
import { assertBalance, assertPlatformError, assertVendorError, FRESH_BALANCE, postGeneration } from "../support/jobs-api-helpers.js";

/*
 * Authentication and model grants (spec section 5) on both surfaces, and the
 * project-wide and per-model pause (spec section 7, 503).
 */

const LITE = "aimodel-3.1-flash-lite-image";
const VENDOR = "/api/aimodel/v1beta";
const imageBody = (model = "aimodel-3-pro-image") => ({ model, prompt: "a red fox", aspect_ratio: "1:1", resolution: "1K" });
const textBody = (text = "Say hello to the harbor.") => ({ contents: [{ role: "user", parts: [{ text }] }] });
const interactionBody = { model: "videomodel-3.1-generate-001", instances: [{ prompt: "waves" }], parameters: { durationSeconds: 1 } };

function generateContent(service: TestService, vendorKey: string | undefined, model = "aimodel-3.5-flash", headers: Record<string, string> = {}) {
  return call(service, "POST", `${VENDOR}/models/${model}:generateContent`, { vendorKey, body: textBody(), headers });
}
function streamGenerateContent(service: TestService, vendorKey: string | undefined, model = "aimodel-3.5-flash") {
  return call(service, "POST", `${VENDOR}/models/${model}:streamGenerateContent?alt=sse`, { vendorKey, body: textBody() });
}
function interaction(service: TestService, vendorKey: string | undefined) {
  return call(service, "POST", `${VENDOR}/interactions`, { vendorKey, body: interactionBody });
}

/** Exact cost of a text answer at 0.30 / 2.50 per 1M tokens (aimodel-3.5-flash). */
function textCost(usage: { promptTokenCount: number; candidatesTokenCount: number }): bigint {
  return (pico("0.30") * BigInt(usage.promptTokenCount) + pico("2.50") * BigInt(usage.candidatesTokenCount)) / 1_000_000n;
}

describe("authentication", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  const platformRoutes = (key?: string) => [
    { what: "POST /api/v1/generations", send: () => call(service, "POST", "/api/v1/generations", { key, body: imageBody() }) },
    { what: "POST /api/v1/nb/text-generations", send: () => call(service, "POST", "/api/v1/nb/text-generations", { key, body: { prompt: "x", aspect_ratio: "1:1" } }) },
    { what: "GET /api/v1/jobs/{id}", send: () => call(service, "GET", `/api/v1/jobs/${randomUUID()}`, { key }) },
    { what: "GET /api/v1/balance", send: () => call(service, "GET", "/api/v1/balance", { key }) },
  ];
  const vendorRoutes = (key?: string) => [
    { what: ":generateContent", send: () => generateContent(service, key) },
    { what: ":streamGenerateContent", send: () => streamGenerateContent(service, key) },
    { what: "/interactions", send: () => interaction(service, key) },
    { what: ":countTokens", send: () => call(service, "POST", `${VENDOR}/models/aimodel-3.5-flash:countTokens`, { vendorKey: key, body: textBody() }) },
    { what: "GET /models", send: () => call(service, "GET", `${VENDOR}/models`, { vendorKey: key }) },
    { what: "GET /models/{model}", send: () => call(service, "GET", `${VENDOR}/models/aimodel-3.5-flash`, { vendorKey: key }) },
  ];

  it("answers 401 missing_api_key on /api/v1 without an Authorization header", async () => {
    for (const route of platformRoutes()) assertPlatformError(await route.send(), 401, "missing_api_key");
  });

  it("answers 401 invalid_api_key on /api/v1 for an unknown key", async () => {
    for (const route of platformRoutes("sk_not_a_real_key")) assertPlatformError(await route.send(), 401, "invalid_api_key");
  });

  it("answers 401 on the vendor surface without x-vendor-api-key, in the vendor error shape", async () => {
    for (const route of vendorRoutes()) assertVendorError(await route.send(), 401, "UNAUTHENTICATED", "MISSING_API_KEY");
  });

  it("answers 401 on the vendor surface for an unknown x-vendor-api-key", async () => {
    for (const route of vendorRoutes("sk_not_a_real_key")) assertVendorError(await route.send(), 401, "UNAUTHENTICATED", "INVALID_API_KEY");
  });

  it("does not take a Bearer key on the vendor surface: only x-vendor-api-key authenticates there", async () => {
    const customer = await createCustomer(service);
    const bearer = await generateContent(service, undefined, "aimodel-3.5-flash", { authorization: `Bearer ${customer.apiKey}` });
    assertVendorError(bearer, 401, "UNAUTHENTICATED");
    const vendor = await generateContent(service, customer.apiKey);
    assert.equal(vendor.status, 200, vendor.text);
  });

  it("refuses a revoked key at once with 401 on both surfaces, while the account's other key keeps working", async () => {
    const customer = await createCustomer(service);
    const spare = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/keys`, { admin: true, body: { models: ["*"] } });
    assert.equal(spare.status, 201);
    assert.equal((await balanceOf(service, customer.apiKey)).balance, "10.00");
    const revoked = await call(service, "DELETE", `/admin/v1/keys/${customer.keyId}`, { admin: true });
    assert.equal(revoked.status, 200, revoked.text);
    assert.equal(revoked.json.revoked, true);
    for (const route of platformRoutes(customer.apiKey)) assertPlatformError(await route.send(), 401, "invalid_api_key");
    for (const route of vendorRoutes(customer.apiKey)) assertVendorError(await route.send(), 401, "UNAUTHENTICATED");
    assert.equal((await postGeneration(service, spare.json.api_key, imageBody())).status, 202);
  });

  it("shares one key and one balance between /api/v1 and the vendor surface", async () => {
    const customer = await createCustomer(service);
    const created = await postGeneration(service, customer.apiKey, imageBody());
    assert.equal(created.status, 202, created.text);
    const text = await generateContent(service, customer.apiKey);
    assert.equal(text.status, 200, text.text);
    const video = await interaction(service, customer.apiKey);
    assert.equal(video.status, 202, video.text);
    // The vendor-made video job is the same account's: readable with the Bearer header.
    const [imageJob, videoJob] = await Promise.all([
      finishedJob(service, customer.apiKey, created.json.job_id),
      finishedJob(service, customer.apiKey, video.json.job_id, 60_000),
    ]);
    assert.equal(imageJob.status, "done");
    assert.equal(videoJob.status, "done");
    // 0.134 image + 1 s of 720p video at 0.40 + the text call's exact token cost.
    const expected = pico("10.00") - pico("0.134") - pico("0.40") - textCost(text.json.usageMetadata);
    const balance = await balanceOf(service, customer.apiKey);
    assert.equal(pico(balance.balance), expected);
    assert.equal(pico(balance.reserved), 0n);
    assert.equal(pico(balance.available), expected);
  });

  describe("model grants", () => {
    it("answers 403 model_not_permitted for models a key was not granted, on both surfaces, reserving nothing", async () => {
      const customer = await createCustomer(service, "10.00", ["aimodel-3-pro-image"]);
      assertPlatformError(await postGeneration(service, customer.apiKey, imageBody("aimodel-3.1-flash-image")), 403, "model_not_permitted");
      assertPlatformError(await postGeneration(service, customer.apiKey, { model: "aimodel-3.5-flash", prompt: "hi" }), 403, "model_not_permitted");
      assertPlatformError(await call(service, "POST", "/api/v1/nb/text-generations", { key: customer.apiKey, body: { prompt: "x" } }), 403, "model_not_permitted");
      assertVendorError(await generateContent(service, customer.apiKey), 403, "PERMISSION_DENIED", "MODEL_NOT_PERMITTED");
      assertVendorError(await interaction(service, customer.apiKey), 403, "PERMISSION_DENIED", "MODEL_NOT_PERMITTED");
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
    });

    it("accepts the granted model, by its id and by its -preview alias", async () => {
      const customer = await createCustomer(service, "10.00", ["aimodel-3-pro-image"]);
      assert.equal((await postGeneration(service, customer.apiKey, imageBody("aimodel-3-pro-image"))).status, 202);
      assert.equal((await postGeneration(service, customer.apiKey, imageBody("aimodel-3-pro-image-preview"))).status, 202);
      assert.equal((await call(service, "POST", "/api/v1/text-generations", { key: customer.apiKey, body: { prompt: "x", aspect_ratio: "1:1" } })).status, 202);
    });

    it("does not let * include the lite image model (403)", async () => {
      const customer = await createCustomer(service, "10.00", ["*"]);
      assertPlatformError(await postGeneration(service, customer.apiKey, imageBody(LITE)), 403, "model_not_permitted");
      assert.equal((await postGeneration(service, customer.apiKey, imageBody("aimodel-nbx-2.1"))).status, 202);
      await assertBalance(service, customer.apiKey, { balance: "10.00", reserved: "0.05", available: "9.95" });
    });

    it("accepts the lite image model when a key grants it by name", async () => {
      const withStar = await createCustomer(service, "10.00", ["*", LITE]);
      assert.equal((await postGeneration(service, withStar.apiKey, imageBody(LITE))).status, 202);
      const onlyLite = await createCustomer(service, "10.00", [LITE]);
      const created = await postGeneration(service, onlyLite.apiKey, imageBody(LITE));
      assert.equal(created.status, 202, created.text);
      assert.equal((await finishedJob(service, onlyLite.apiKey, created.json.job_id)).status, "done");
      assertPlatformError(await postGeneration(service, onlyLite.apiKey, imageBody()), 403, "model_not_permitted");
    });
  });
});

describe("pause", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  const setProjectPaused = async (paused: boolean) => {
    const response = await call(service, "PUT", "/admin/v1/pause", { admin: true, body: { paused } });
    assert.equal(response.status, 200, response.text);
    assert.equal(response.json.paused, paused);
  };
  const setModelPaused = async (model: string, paused: boolean) => {
    const response = await call(service, "PUT", `/admin/v1/models/${model}/pause`, { admin: true, body: { paused } });
    assert.equal(response.status, 200, response.text);
    assert.equal(response.json.paused, paused);
  };

  function assertRetryAfter(response: ApiResponse) {
    const retryAfter = response.headers.get("retry-after");
    assert.match(retryAfter ?? "", /^\d+$/, `Retry-After is ${retryAfter}`);
    assert.ok(Number(retryAfter) > 0);
  }

  /** Every way to create work, on both surfaces. */
  const creations = (key: string) => [
    { what: "image job", surface: "platform", send: () => postGeneration(service, key, imageBody()) },
    { what: "text job", surface: "platform", send: () => postGeneration(service, key, { model: "aimodel-3.5-flash", prompt: "hi" }) },
    { what: "video job", surface: "platform", send: () => postGeneration(service, key, { model: "videomodel-3.1-generate-001", prompt: "waves", resolution: "720p", duration_seconds: 4 }) },
    ...["/nb", "/nb2", ""].flatMap((prefix) => [
      { what: `${prefix}/text-generations`, surface: "platform", send: () => call(service, "POST", `/api/v1${prefix}/text-generations`, { key, body: { prompt: "x", aspect_ratio: "1:1" } }) },
      { what: `${prefix}/url-generations`, surface: "platform", send: () => call(service, "POST", `/api/v1${prefix}/url-generations`, { key, body: { prompt: "x", aspect_ratio: "1:1", input_images_urls: ["http://127.0.0.1:9/a.png"] } }) },
    ]),
    { what: ":generateContent", surface: "vendor", send: () => generateContent(service, key) },
    { what: ":streamGenerateContent", surface: "vendor", send: () => streamGenerateContent(service, key) },
    { what: "/interactions", surface: "vendor", send: () => interaction(service, key) },
  ];

  it("answers 503 project_paused with Retry-After to every creation while the project is paused, reserving nothing", async () => {
    const customer = await createCustomer(service);
    await setProjectPaused(true);
    try {
      for (const creation of creations(customer.apiKey)) {
        const response = await creation.send();
        if (creation.surface === "vendor") assertVendorError(response, 503, "UNAVAILABLE", "PROJECT_PAUSED");
        else assertPlatformError(response, 503, "project_paused");
        assertRetryAfter(response);
      }
      // Reading is not creating: balance still answers, and nothing is held.
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
    } finally {
      await setProjectPaused(false);
    }
  });

  it("accepts creations again once the project is unpaused", async () => {
    const customer = await createCustomer(service);
    await setProjectPaused(true);
    await setProjectPaused(false);
    const created = await postGeneration(service, customer.apiKey, imageBody());
    assert.equal(created.status, 202, created.text);
    assert.equal((await finishedJob(service, customer.apiKey, created.json.job_id)).status, "done");
    const text = await generateContent(service, customer.apiKey);
    assert.equal(text.status, 200, text.text);
  });

  it("answers 503 model_paused only for the paused model", async () => {
    const customer = await createCustomer(service);
    await setModelPaused("aimodel-3-pro-image", true);
    try {
      for (const response of [
        await postGeneration(service, customer.apiKey, imageBody("aimodel-3-pro-image")),
        await postGeneration(service, customer.apiKey, imageBody("aimodel-3-pro-image-preview")),
        await call(service, "POST", "/api/v1/text-generations", { key: customer.apiKey, body: { prompt: "x", aspect_ratio: "1:1" } }),
      ]) {
        assertPlatformError(response, 503, "model_paused");
        assertRetryAfter(response);
      }
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
      assert.equal((await postGeneration(service, customer.apiKey, imageBody("aimodel-3.1-flash-image"))).status, 202);
      assert.equal((await call(service, "POST", "/api/v1/nb2/text-generations", { key: customer.apiKey, body: { prompt: "x", aspect_ratio: "1:1" } })).status, 202);
      assert.equal((await generateContent(service, customer.apiKey)).status, 200);
    } finally {
      await setModelPaused("aimodel-3-pro-image", false);
    }
    assert.equal((await postGeneration(service, customer.apiKey, imageBody("aimodel-3-pro-image"))).status, 202);
  });

  it("answers 503 model_paused on the vendor surface for a paused text model, and serves the other text models", async () => {
    const customer = await createCustomer(service);
    await setModelPaused("aimodel-3.5-flash", true);
    try {
      for (const response of [await generateContent(service, customer.apiKey), await streamGenerateContent(service, customer.apiKey)]) {
        assertVendorError(response, 503, "UNAVAILABLE", "MODEL_PAUSED");
        assertRetryAfter(response);
      }
      assertPlatformError(await postGeneration(service, customer.apiKey, { model: "aimodel-3.5-flash", prompt: "hi" }), 503, "model_paused");
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
      assert.equal((await generateContent(service, customer.apiKey, "aimodel-3.6-flash")).status, 200);
    } finally {
      await setModelPaused("aimodel-3.5-flash", false);
    }
    assert.equal((await generateContent(service, customer.apiKey)).status, 200);
  });

  it("does not consume an Idempotency-Key on a 503: the retry after unpausing creates the job", async () => {
    const customer = await createCustomer(service);
    const headers = { "idempotency-key": `retry-${randomUUID()}` };
    await setProjectPaused(true);
    try {
      const paused = await postGeneration(service, customer.apiKey, imageBody(), headers);
      assertPlatformError(paused, 503, "project_paused");
    } finally {
      await setProjectPaused(false);
    }
    const created = await postGeneration(service, customer.apiKey, imageBody(), headers);
    assert.equal(created.status, 202, created.text);
    assert.equal(created.headers.get("idempotent-replayed"), null);
    // From now on the key is bound to that job.
    const replay = await postGeneration(service, customer.apiKey, imageBody(), headers);
    assert.equal(replay.status, 202);
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.equal(replay.json.job_id, created.json.job_id);
    await finishedJob(service, customer.apiKey, created.json.job_id);
    await assertBalance(service, customer.apiKey, { balance: "9.866", reserved: "0.00", available: "9.866" });
  });

  it("refuses to pause with a customer API key instead of the admin token (401)", async () => {
    const customer = await createCustomer(service);
    const response = await call(service, "PUT", "/admin/v1/pause", { key: customer.apiKey, body: { paused: true } });
    assert.equal(response.status, 401, response.text);
    assert.equal((await postGeneration(service, customer.apiKey, imageBody())).status, 202);
  });
});
