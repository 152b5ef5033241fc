// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { balanceOf, call, createCustomer, finishedJob, startTestService, type TestService } from "../support/harness.js";
import { probePng } from "../support/media-probe.js";

describe("walk-through: account, key, image job, download", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("creates an image job that ends done with a downloadable PNG and charges its price", async () => {
    const customer = await createCustomer(service, "1.00");
    const created = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey,
      body: { model: "aimodel-3-pro-image", prompt: "a red fox", aspect_ratio: "16:9", resolution: "1K" },
    });
    assert.equal(created.status, 202);
    assert.equal(created.json.status, "queued");
    assert.equal(created.json.status_url, `/api/v1/jobs/${created.json.job_id}`);
    const job = await finishedJob(service, customer.apiKey, created.json.job_id);
    assert.equal(job.status, "done");
    const image = await fetch(job.result.image_url);
    assert.equal(image.status, 200);
    assert.equal(image.headers.get("content-type"), "image/png");
    assert.deepEqual(probePng(new Uint8Array(await image.arrayBuffer())), { width: 1024, height: 576 });
    assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "0.866", reserved: "0.00", available: "0.866", currency: "USD" });
  });
});
