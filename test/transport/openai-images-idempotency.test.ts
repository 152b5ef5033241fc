// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { balanceOf, createCustomer, eventually, pico, startTestService, type TestService } from "../support/harness.js";
import { allEntries } from "../support/ledger-helpers.js";
import { openAiBaseUrl } from "../support/openai-helpers.js";

/**
 * OpenAI's images.generate with an Idempotency-Key header (a request option of the openai SDK), as job creation
 * honours it: the same key and body answer the same images and charge once; the same key with another body is
 * refused (the jobs' idempotency_key_reused, 400 on this surface) and charges nothing more.
 */
const client = (service: TestService, apiKey: string) => new OpenAI({ apiKey, baseURL: openAiBaseUrl(service), maxRetries: 0 });
const PRO_IMAGE_1K = "0.134";
const MODEL = "aimodel-3-pro-image";

/** The statement's charges, oldest first, once nothing is held. */
async function charges(service: TestService, apiKey: string) {
  await eventually(() => balanceOf(service, apiKey), (b) => b.reserved === "0.00", { what: "every hold to end" });
  return (await allEntries(service, { key: apiKey })).filter((e) => e.type === "charge").reverse().map((e) => ({ amount: -pico(e.amount), job: e.job_id }));
}

describe("when the openai SDK generates images with an Idempotency-Key", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("when the same key and body are sent twice, then the same images come back and each image is charged once", async () => {
    const customer = await createCustomer(service, "10.00");
    const openai = client(service, customer.apiKey);
    const body = { model: MODEL, prompt: "a lighthouse at dusk", n: 2, size: "1024x1024" as const, response_format: "b64_json" as const };
    const first = await openai.images.generate(body, { headers: { "Idempotency-Key": "images-key-1" } });
    const again = await openai.images.generate(body, { headers: { "Idempotency-Key": "images-key-1" } });
    assert.equal(first.data!.length, 2);
    assert.deepEqual(again.data!.map((d) => d.b64_json), first.data!.map((d) => d.b64_json), "the same images");
    const charged = await charges(service, customer.apiKey);
    assert.deepEqual(charged.map((c) => c.amount), [pico(PRO_IMAGE_1K), pico(PRO_IMAGE_1K)]);
    assert.equal(new Set(charged.map((c) => c.job)).size, 2, "two jobs, each charged once");
    assert.equal((await balanceOf(service, customer.apiKey)).balance, "9.732");
  });

  it("when the same key comes with another body (n, prompt or format), then 400 idempotency_key_reused, and nothing more is charged", async () => {
    const customer = await createCustomer(service, "10.00");
    const openai = client(service, customer.apiKey);
    const body = { model: MODEL, prompt: "a harbour", n: 1, size: "1024x1024" as const };
    await openai.images.generate(body, { headers: { "Idempotency-Key": "images-key-2" } });
    for (const other of [{ ...body, n: 2 }, { ...body, prompt: "a castle" }, { ...body, response_format: "b64_json" as const }]) {
      const error = await openai.images.generate(other, { headers: { "Idempotency-Key": "images-key-2" } }).then(
        () => assert.fail("expected a refusal"), (thrown: unknown) => thrown,
      );
      assert.ok(error instanceof OpenAI.BadRequestError, String(error));
      assert.equal(error.code, "idempotency_key_reused");
    }
    assert.deepEqual((await charges(service, customer.apiKey)).map((c) => c.amount), [pico(PRO_IMAGE_1K)]);
    assert.equal((await balanceOf(service, customer.apiKey)).balance, "9.866");
  });

  it("when no key is sent, then each call makes its own images and is charged", async () => {
    const customer = await createCustomer(service, "10.00");
    const openai = client(service, customer.apiKey);
    const body = { model: MODEL, prompt: "a bridge", size: "1024x1024" as const };
    await openai.images.generate(body);
    await openai.images.generate(body);
    assert.deepEqual((await charges(service, customer.apiKey)).map((c) => c.amount), [pico(PRO_IMAGE_1K), pico(PRO_IMAGE_1K)]);
  });
});
