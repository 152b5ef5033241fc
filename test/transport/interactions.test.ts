// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { balanceOf, call, createCustomer, finishedJob, pico, startTestService, type TestService } from "../support/harness.js";
import { probeMp4 } from "../support/media-probe.js";
import { assertVendorError, VENDOR } from "../support/vendor-helpers.js";

const VIDEO_MODEL = "videomodel-3.1-generate-001";
const PRICE_PER_SECOND_720P = "0.40";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

describe("video interactions: POST /api/aimodel/v1beta/interactions", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  const interact = (key: string | undefined, body: unknown) =>
    call(service, "POST", `${VENDOR}/interactions`, key ? { vendorKey: key, body } : { body });

  /** Creates a video through the endpoint, waits for it and checks the file and the exact charge. */
  async function videoOf(parameters: { durationSeconds?: number } | undefined, expectedSeconds: number) {
    const customer = await createCustomer(service, "10.00");
    const body: Record<string, unknown> = { model: VIDEO_MODEL, instances: [{ prompt: "waves rolling onto a beach at dusk" }] };
    if (parameters) body.parameters = parameters;
    const created = await interact(customer.apiKey, body);
    assert.equal(created.status, 202, created.text);
    assert.match(created.json.job_id, UUID);
    assert.equal(created.json.status, "queued");
    assert.equal(created.json.status_url, `/api/v1/jobs/${created.json.job_id}`);

    const job = await finishedJob(service, customer.apiKey, created.json.job_id);
    assert.equal(job.status, "done", JSON.stringify(job));
    assert.equal(job.model, VIDEO_MODEL);
    assert.equal(typeof job.result.image_url, "string");
    const download = await fetch(job.result.image_url);
    assert.equal(download.status, 200);
    assert.equal(download.headers.get("content-type"), "video/mp4");
    const probe = await probeMp4(new Uint8Array(await download.arrayBuffer()));
    assert.equal(probe.width, 1280);
    assert.equal(probe.height, 720);
    assert.match(probe.codec, /^avc1/);
    assert.ok(Math.abs(probe.durationSeconds - expectedSeconds) < 0.05, `duration ${probe.durationSeconds}s ≈ ${expectedSeconds}s`);

    const balance = await balanceOf(service, customer.apiKey);
    assert.equal(balance.reserved, "0.00");
    assert.equal(pico("10.00") - pico(balance.balance), pico(PRICE_PER_SECOND_720P) * BigInt(expectedSeconds));
    // The job records what was held at acceptance as well as what was finally charged.
    assert.equal(pico(job.usage.reserved), pico(PRICE_PER_SECOND_720P) * BigInt(expectedSeconds));
    assert.equal(pico(job.usage.charged), pico(PRICE_PER_SECOND_720P) * BigInt(expectedSeconds));
  }

  it("accepts a request with 202 and makes a 4 s 1280x720 H.264 MP4 by default, charged 0.40 × 4", async () => {
    await videoOf(undefined, 4);
  });

  it("makes a 1 s video for durationSeconds 1, charged 0.40 × 1", async () => {
    await videoOf({ durationSeconds: 1 }, 1);
  });

  it("makes an 8 s video for durationSeconds 8, charged 0.40 × 8", async () => {
    await videoOf({ durationSeconds: 8 }, 8);
  });

  for (const durationSeconds of [0, 9]) {
    it(`rejects durationSeconds ${durationSeconds} with 422 INVALID_ARGUMENT (validation, as the spec's table says) and charges nothing`, async () => {
      const customer = await createCustomer(service, "10.00");
      const response = await interact(customer.apiKey, {
        model: VIDEO_MODEL,
        instances: [{ prompt: "a cat" }],
        parameters: { durationSeconds },
      });
      assertVendorError(response, 422, "INVALID_ARGUMENT");
      assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
    });
  }

  it("rejects zero instances and two instances with 422 INVALID_ARGUMENT", async () => {
    const customer = await createCustomer(service, "10.00");
    for (const instances of [[], [{ prompt: "one" }, { prompt: "two" }]]) {
      const response = await interact(customer.apiKey, { model: VIDEO_MODEL, instances });
      assertVendorError(response, 422, "INVALID_ARGUMENT");
    }
    const missing = await interact(customer.apiKey, { model: VIDEO_MODEL });
    assertVendorError(missing, 422, "INVALID_ARGUMENT");
    assert.equal((await balanceOf(service, customer.apiKey)).balance, "10.00");
  });

  it("rejects another known model with 422 INVALID_ARGUMENT", async () => {
    const customer = await createCustomer(service, "10.00");
    for (const model of ["aimodel-3-pro-image", "aimodel-3.5-flash", "aimodel-omni-1.1-flash"]) {
      const response = await interact(customer.apiKey, { model, instances: [{ prompt: "a cat" }] });
      assertVendorError(response, 422, "INVALID_ARGUMENT");
    }
  });

  it("rejects an unknown model with 404 NOT_FOUND in the vendor error shape", async () => {
    const customer = await createCustomer(service, "10.00");
    const response = await interact(customer.apiKey, { model: "videomodel-9-nope", instances: [{ prompt: "a cat" }] });
    assertVendorError(response, 404, "NOT_FOUND");
  });

  it("rejects a request without x-vendor-api-key, or with a wrong one, with 401 UNAUTHENTICATED", async () => {
    const body = { model: VIDEO_MODEL, instances: [{ prompt: "a cat" }] };
    assertVendorError(await interact(undefined, body), 401, "UNAUTHENTICATED");
    assertVendorError(await interact("gsk_wrong", body), 401, "UNAUTHENTICATED");
  });

  it("rejects a video the balance cannot cover with 402 (the spec's insufficient funds), status RESOURCE_EXHAUSTED, and holds nothing", async () => {
    const customer = await createCustomer(service, "1.00");
    const response = await interact(customer.apiKey, {
      model: VIDEO_MODEL,
      instances: [{ prompt: "a cat" }],
      parameters: { durationSeconds: 3 },
    });
    assertVendorError(response, 402, "RESOURCE_EXHAUSTED");
    assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "1.00", reserved: "0.00", available: "1.00", currency: "USD" });
  });
});
