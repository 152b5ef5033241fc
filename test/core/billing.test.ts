// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  call, createCustomer, eventually, finishedJob, pico, startTestService, type TestService,
} from "../support/harness.js";
import {
  assertBalanceObject, checkedBalance, money, perMillion, tokensOf, watchJob, type BalanceJson,
} from "../support/billing-helpers.js";

// Prices from src/config/default-prices.json. aimodel-3-pro-image is reserved
// for the price-change test, so no other test here depends on its price.
const FLASH_1K = "0.067";
const FAST = "0.039";
const TEXT_MODEL = "aimodel-3.5-flash";
const TEXT_IN = "0.30";
const TEXT_OUT = "2.50";
const TEXT_MAX_OUTPUT = 8192;

const imageBody = (prompt = "a lighthouse at dusk") => ({
  model: "aimodel-3.1-flash-image", prompt, aspect_ratio: "1:1", resolution: "1K",
});

function assertInsufficientFunds(response: { status: number; json: any; headers: Headers }) {
  assert.equal(response.status, 402);
  assert.equal(response.json.error.code, "insufficient_funds");
  assert.equal(typeof response.json.error.message, "string");
  assert.equal(response.json.job_id, undefined);
  assert.equal(response.headers.get("location"), null);
}

describe("billing: reservations, charges and releases (latency 300 ms)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ SIMULATED_LATENCY_MS: "300" });
  });
  after(() => service.close());

  it("answers the balance object with balance, reserved, available and currency as exact strings", async () => {
    const customer = await createCustomer(service, "12.3450");
    const response = await call(service, "GET", "/api/v1/balance", { key: customer.apiKey });
    assert.equal(response.status, 200);
    assertBalanceObject(response.json);
    assert.deepEqual(response.json, { balance: "12.345", reserved: "0.00", available: "12.345", currency: "USD" });
  });

  it("reserves an image's price while the job runs and charges exactly that price when it is done", async () => {
    const customer = await createCustomer(service, "1.00");
    const created = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: imageBody() });
    assert.equal(created.status, 202, created.text);
    const { job, inFlight } = await watchJob(service, customer.apiKey, created.json.job_id);
    assert.equal(job.status, "done");
    assert.ok(inFlight.length > 0, "no balance sample was taken while the job ran");
    for (const b of inFlight) {
      assert.equal(pico(b.reserved), pico(FLASH_1K), `reserved mid-job: ${JSON.stringify(b)}`);
      assert.equal(pico(b.balance), pico("1.00"), "nothing is charged before the job is done");
    }
    const final = await checkedBalance(service, customer.apiKey);
    assert.equal(pico(final.balance), pico("1.00") - pico(FLASH_1K));
    assert.equal(pico(final.reserved), 0n);
    assert.equal(pico(final.available), pico("1.00") - pico(FLASH_1K));
  });

  it("releases the reservation of a failed job and charges nothing", async () => {
    const customer = await createCustomer(service, "1.00");
    const created = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey, body: imageBody("a castle [simulate:fail]"),
    });
    assert.equal(created.status, 202, created.text);
    const { job, inFlight } = await watchJob(service, customer.apiKey, created.json.job_id);
    assert.equal(job.status, "failed");
    assert.equal(job.error, "generation_failed");
    assert.ok(inFlight.length > 0, "no balance sample was taken while the job ran");
    for (const b of inFlight) assert.equal(pico(b.reserved), pico(FLASH_1K));
    assert.deepEqual(await checkedBalance(service, customer.apiKey), {
      balance: "1.00", reserved: "0.00", available: "1.00", currency: "USD",
    });
  });

  for (const video of [
    { resolution: "720p", duration: 5, price: "2.00" },
    { resolution: "4k", duration: 8, price: "4.80" },
  ]) {
    it(`reserves then charges per second × duration for ${video.resolution} video of ${video.duration} s (${video.price})`, async () => {
      const customer = await createCustomer(service, "10.00");
      const created = await call(service, "POST", "/api/v1/generations", {
        key: customer.apiKey,
        body: {
          model: "videomodel-3.1-generate-001", prompt: "waves on a beach", aspect_ratio: "16:9",
          resolution: video.resolution, duration_seconds: video.duration,
        },
      });
      assert.equal(created.status, 202, created.text);
      const { job, inFlight } = await watchJob(service, customer.apiKey, created.json.job_id, 60_000);
      assert.equal(job.status, "done", JSON.stringify(job));
      assert.ok(inFlight.length > 0, "no balance sample was taken while the job ran");
      for (const b of inFlight) {
        assert.equal(pico(b.reserved), pico(video.price), `reserved mid-job: ${JSON.stringify(b)}`);
        assert.equal(pico(b.balance), pico("10.00"));
      }
      const final = await checkedBalance(service, customer.apiKey);
      assert.equal(pico(final.balance), pico("10.00") - pico(video.price), `final ${JSON.stringify(final)}`);
      assert.equal(pico(final.reserved), 0n);
    });
  }

  it("reserves input × prompt tokens + output × 8192 for a text job and settles to the exact usage", async () => {
    const customer = await createCustomer(service, "1.00");
    const prompt = "Explain in two sentences why ledgers must use exact integer arithmetic — ünïcödé counts as bytes.";
    const estimate = perMillion(TEXT_IN, tokensOf(prompt)) + perMillion(TEXT_OUT, TEXT_MAX_OUTPUT);
    const created = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey, body: { model: TEXT_MODEL, prompt, aspect_ratio: "auto", resolution: "1K" },
    });
    assert.equal(created.status, 202, created.text);
    const { job, inFlight } = await watchJob(service, customer.apiKey, created.json.job_id);
    assert.equal(job.status, "done", JSON.stringify(job));
    assert.ok(inFlight.length > 0, "no balance sample was taken while the job ran");
    for (const b of inFlight) {
      assert.equal(pico(b.reserved), estimate, `reserved ${b.reserved}, estimate ${money(estimate)}`);
    }

    const usage = job.usage;
    assert.equal(usage.prompt_token_count, tokensOf(prompt));
    assert.ok(usage.candidates_token_count > 0);
    assert.equal(usage.total_token_count, usage.prompt_token_count + usage.candidates_token_count);
    assert.equal(usage.candidates_token_count, tokensOf(job.result.text), "candidate tokens follow the documented token rule");
    const charge = perMillion(TEXT_IN, usage.prompt_token_count) + perMillion(TEXT_OUT, usage.candidates_token_count);
    assert.ok(charge < estimate, "the estimate covers the actual charge");
    assert.equal(pico(usage.charged), charge, `usage.charged ${usage.charged} != ${money(charge)}`);
    assert.equal(pico(usage.reserved), estimate, `usage.reserved ${usage.reserved} != ${money(estimate)}`);

    const final = await checkedBalance(service, customer.apiKey);
    assert.equal(pico(final.balance), pico("1.00") - charge, `balance ${final.balance}, expected ${money(pico("1.00") - charge)}`);
    assert.equal(pico(final.reserved), 0n);
  });

  it("applies an admin price change to the next job while a job accepted earlier keeps its price", async () => {
    const model = "aimodel-3-pro-image";
    const prices = await call(service, "GET", "/admin/v1/prices", { admin: true });
    assert.equal(prices.status, 200);
    const original = prices.json.prices.find((p: any) => p.model === model);
    assert.ok(original, "3-pro-image has a price");
    const oldPrice = original.per_image["1K"] as string;
    assert.equal(pico(oldPrice), pico("0.134"));
    const body = { model, prompt: "a violin", aspect_ratio: "1:1", resolution: "1K" };
    const customer = await createCustomer(service, "2.00");
    try {
      const before = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body });
      assert.equal(before.status, 202, before.text);

      const changed = await call(service, "PUT", `/admin/v1/prices/${model}`, { admin: true, body: { per_image: { "1K": "0.5" } } });
      assert.equal(changed.status, 200, changed.text);
      assert.equal(changed.json.model, model);
      assert.equal(pico(changed.json.per_image["1K"]), pico("0.5"));
      const listed = await call(service, "GET", "/api/v1/models");
      const entry = listed.json.models.find((m: any) => m.id === model);
      assert.equal(pico(entry.price.per_image["1K"]), pico("0.5"), "GET /api/v1/models shows the new price");

      const afterChange = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body });
      assert.equal(afterChange.status, 202, afterChange.text);
      const { job: secondJob, inFlight } = await watchJob(service, customer.apiKey, afterChange.json.job_id);
      assert.equal(secondJob.status, "done");
      assert.ok(inFlight.length > 0, "no balance sample was taken while the second job ran");
      // The first job may or may not still hold its old-price reservation at each sample.
      const allowed = [pico("0.5"), pico("0.5") + pico(oldPrice)];
      for (const b of inFlight) assert.ok(allowed.includes(pico(b.reserved)), `reserved mid-job: ${JSON.stringify(b)}`);

      assert.equal((await finishedJob(service, customer.apiKey, before.json.job_id)).status, "done");
      const final = await checkedBalance(service, customer.apiKey);
      assert.equal(pico(final.balance), pico("2.00") - pico(oldPrice) - pico("0.5"), `final ${JSON.stringify(final)}`);
      assert.equal(pico(final.reserved), 0n);
    } finally {
      const restored = await call(service, "PUT", `/admin/v1/prices/${model}`, { admin: true, body: { per_image: original.per_image } });
      assert.equal(restored.status, 200, restored.text);
    }
  });

  it("answers 402 insufficient_funds for a request it cannot reserve, with no job and no money moved", async () => {
    const customer = await createCustomer(service, "0.10");
    const before = await checkedBalance(service, customer.apiKey);
    const refused = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey,
      body: { model: "aimodel-3.1-flash-image", prompt: "a glacier", aspect_ratio: "1:1", resolution: "4K" },
    });
    assertInsufficientFunds(refused);
    assert.deepEqual(await checkedBalance(service, customer.apiKey), before);

    // A later job settles against the balance: had the 402 left a job or hold behind, it would show here.
    const credited = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { admin: true, body: { amount: "0.90" } });
    assert.equal(credited.status, 200, credited.text);
    const created = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: imageBody() });
    assert.equal(created.status, 202, created.text);
    assert.equal((await finishedJob(service, customer.apiKey, created.json.job_id)).status, "done");
    const final = await checkedBalance(service, customer.apiKey);
    assert.equal(pico(final.balance), pico("1.00") - pico(FLASH_1K));
    assert.equal(pico(final.reserved), 0n);
  });

  it("accepts exactly one job from a balance of exactly one image's price and refuses the next with 402", async () => {
    const customer = await createCustomer(service, FLASH_1K);
    const first = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: imageBody("one") });
    assert.equal(first.status, 202, first.text);
    const held = await checkedBalance(service, customer.apiKey);
    assert.equal(pico(held.available), 0n, `available after the first: ${JSON.stringify(held)}`);
    const second = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: imageBody("two") });
    assertInsufficientFunds(second);
    assert.equal((await finishedJob(service, customer.apiKey, first.json.job_id)).status, "done");
    assert.deepEqual(await checkedBalance(service, customer.apiKey), {
      balance: "0.00", reserved: "0.00", available: "0.00", currency: "USD",
    });
  });

  it("raises the balance by exactly the credited amount", async () => {
    const customer = await createCustomer(service, "0.10");
    const credited = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, {
      admin: true, body: { amount: "5.000000000001" },
    });
    assert.equal(credited.status, 200, credited.text);
    assertBalanceObject(credited.json);
    assert.equal(pico(credited.json.balance), pico("5.100000000001"));
    assert.equal(credited.json.balance, "5.100000000001");
    assert.deepEqual(await checkedBalance(service, customer.apiKey), credited.json);
    const viaAdmin = await call(service, "GET", `/admin/v1/accounts/${customer.accountId}/balance`, { admin: true });
    assert.equal(viaAdmin.status, 200);
    assert.deepEqual(viaAdmin.json, credited.json);
  });
});

describe("billing race: 50 parallel creations against a balance covering exactly ten", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ SIMULATED_LATENCY_MS: "5" });
  });
  after(() => service.close());

  it("gives exactly ten 202 and forty 402 and ends at exactly 0.00 with nothing reserved", async () => {
    const customer = await createCustomer(service, "0.39");
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        call(service, "POST", "/api/v1/generations", {
          key: customer.apiKey, body: { model: "aimodel-2.5-flash-image", prompt: `race ${i}`, aspect_ratio: "1:1" },
        }),
      ),
    );
    const accepted = responses.filter((r) => r.status === 202);
    const refused = responses.filter((r) => r.status === 402);
    assert.equal(accepted.length, 10, `statuses: ${responses.map((r) => r.status).join(",")}`);
    assert.equal(refused.length, 40);
    for (const r of refused) assert.equal(r.json.error.code, "insufficient_funds");
    assert.equal(new Set(accepted.map((r) => r.json.job_id)).size, 10);

    const jobs = await Promise.all(accepted.map((r) => finishedJob(service, customer.apiKey, r.json.job_id)));
    assert.deepEqual(jobs.map((j) => j.status), Array(10).fill("done"));
    const final: BalanceJson = await checkedBalance(service, customer.apiKey);
    assert.equal(pico(FAST) * 10n, pico("0.39"));
    assert.deepEqual(final, { balance: "0.00", reserved: "0.00", available: "0.00", currency: "USD" });
  });

  it("keeps available == balance − reserved while the parallel jobs settle", async () => {
    const customer = await createCustomer(service, "0.195");
    const responses = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        call(service, "POST", "/api/v1/generations", {
          key: customer.apiKey, body: { model: "aimodel-2.5-flash-image", prompt: `settle ${i}`, aspect_ratio: "1:1" },
        }),
      ),
    );
    assert.equal(responses.filter((r) => r.status === 202).length, 5);
    // Every sample asserts the invariant (checkedBalance); the loop ends once all holds are gone.
    const final = await eventually(
      () => checkedBalance(service, customer.apiKey),
      (b) => pico(b.reserved) === 0n,
      { what: "all reservations to settle", intervalMs: 5 },
    );
    assert.equal(pico(final.balance), 0n);
  });
});
