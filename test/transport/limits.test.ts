// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { call, createCustomer, startTestService, type TestService } from "../support/harness.js";
import { assertBalance, assertPlatformError, assertVendorError, FRESH_BALANCE, postGeneration } from "../support/jobs-api-helpers.js";
import { VENDOR } from "../support/vendor-helpers.js";

/*
 * Prompt and metadata limits (issue 8) through the real ports: every surface
 * that takes a prompt refuses one over its model kind's limit with 422
 * prompt_too_long (the vendor surface: 400 INVALID_ARGUMENT, PROMPT_TOO_LONG;
 * nothing reserved), and metadata over any of its limits with
 * 422 metadata_too_large, at the limit accepted and one over refused.
 */

/** The simulator fails prompts with this marker at once: accepted jobs render nothing in the background. */
const MARKER = "[simulate:fail]";
/** A prompt of exactly `bytes` UTF-8 bytes that carries the marker. */
const prompt = (bytes: number, fill = "x") => {
  const body = fill.repeat(Math.floor((bytes - MARKER.length) / Buffer.byteLength(fill)));
  return MARKER + body + "y".repeat(bytes - MARKER.length - Buffer.byteLength(body));
};

const IMAGE = { model: "aimodel-3-pro-image", aspect_ratio: "1:1", resolution: "1K" };
const VIDEO_MODEL = "videomodel-3.1-generate-001";

const nest = (levels: number, open: string, close: string) => open.repeat(levels) + "1" + close.repeat(levels);
/** The body as raw JSON, so that nesting far beyond what JSON.stringify manages can be sent. */
const rawJob = (metadataJson: string) => `{"model":"aimodel-3-pro-image","prompt":"${MARKER}","aspect_ratio":"1:1","resolution":"1K","metadata":${metadataJson}}`;

const SMALL = {
  MAX_PROMPT_BYTES_IMAGE: "64",
  MAX_PROMPT_BYTES_VIDEO: "48",
  MAX_PROMPT_BYTES_TEXT: "80",
  MAX_METADATA_KEYS: "4",
  MAX_METADATA_KEY_BYTES: "8",
  MAX_METADATA_VALUE_BYTES: "32",
  MAX_METADATA_BYTES: "100",
};

describe("prompt limits on every surface (MAX_PROMPT_BYTES_IMAGE=64, _VIDEO=48, _TEXT=80)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService(SMALL);
  });
  after(() => service.close());

  const jobCases = [
    { name: "an image job", path: "/api/v1/generations", body: IMAGE, limit: 64, kind: "image" },
    { name: "an image job through the deprecated text-generations alias", path: "/api/v1/nb/text-generations", body: { aspect_ratio: "1:1" }, limit: 64, kind: "image" },
    { name: "an image job through the deprecated url-generations alias", path: "/api/v1/url-generations", body: { aspect_ratio: "1:1", input_images_urls: ["http://127.0.0.1:9/a.png"] }, limit: 64, kind: "image" },
    { name: "a video job", path: "/api/v1/generations", body: { model: VIDEO_MODEL }, limit: 48, kind: "video" },
    { name: "a text job", path: "/api/v1/generations", body: { model: "aimodel-3.5-flash" }, limit: 80, kind: "text" },
    { name: "a multimodal real-time job (the text limit)", path: "/api/v1/generations", body: { model: "aimodel-omni-1.1-flash" }, limit: 80, kind: "text" },
  ];
  for (const c of jobCases) {
    it(`when ${c.name} has a prompt of exactly ${c.limit} bytes, then 202; one byte more, then 422 prompt_too_long and nothing reserved`, async () => {
      const customer = await createCustomer(service, "10.00", ["*", "aimodel-3.1-flash-lite-image"]);
      const post = (text: string) => call(service, "POST", c.path, { key: customer.apiKey, body: { ...c.body, prompt: text } });
      const over = await post(prompt(c.limit + 1));
      assertPlatformError(over, 422, "prompt_too_long");
      assert.equal(over.json.error.message, `prompt is longer than ${c.limit} bytes of UTF-8, the limit for ${c.kind} models`);
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
      // Multi-byte characters count their bytes: "é" is 2.
      assertPlatformError(await post(prompt(c.limit + 1, "é")), 422, "prompt_too_long");
      const at = await post(prompt(c.limit, "é"));
      assert.equal(at.status, 202, at.text);
    });
  }

  it("when a video interaction's prompt is over the video limit, then 422 INVALID_ARGUMENT in the vendor's shape (a job's validation); at the limit, 202", async () => {
    const customer = await createCustomer(service);
    const interact = (text: string) =>
      call(service, "POST", `${VENDOR}/interactions`, { vendorKey: customer.apiKey, body: { model: VIDEO_MODEL, instances: [{ prompt: text }] } });
    const over = await interact(prompt(49));
    assertVendorError(over, 422, "INVALID_ARGUMENT", "PROMPT_TOO_LONG");
    assert.match(over.json.error.message, /^instances\[0\]\.prompt is longer than 48 bytes of UTF-8, the limit for video models$/);
    await assertBalance(service, customer.apiKey, FRESH_BALANCE);
    const at = await interact(prompt(48));
    assert.equal(at.status, 202, at.text);
  });

  /** A text request whose parts and system instruction hold `bytes` bytes together. */
  const textBody = (bytes: number) => ({
    systemInstruction: { parts: [{ text: "s".repeat(10) }] },
    contents: [
      { role: "user", parts: [{ text: "a".repeat(30) }, { text: "b".repeat(20) }] },
      { role: "model", parts: [{ text: "c".repeat(bytes - 60) }] },
    ],
  });

  for (const action of [":generateContent", ":streamGenerateContent?alt=sse", ":streamGenerateContent"]) {
    it(`when the text of all parts and the system instruction passes the text limit, then ${action} answers 400 PROMPT_TOO_LONG before any charge`, async () => {
      const customer = await createCustomer(service);
      for (const model of ["aimodel-3.5-flash", "aimodel-omni-1.1-flash"]) {
        const over = await call(service, "POST", `${VENDOR}/models/${model}${action}`, { vendorKey: customer.apiKey, body: textBody(81) });
        assertVendorError(over, 400, "INVALID_ARGUMENT", "PROMPT_TOO_LONG");
        assert.match(over.json.error.message, /^the text of contents and systemInstruction is longer than 80 bytes of UTF-8, the limit for text models$/);
      }
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
      const at = await call(service, "POST", `${VENDOR}/models/aimodel-3.5-flash${action}`, { vendorKey: customer.apiKey, body: textBody(80) });
      assert.equal(at.status, 200, at.text);
    });
  }
});

describe("metadata limits (MAX_METADATA_KEYS=4, _KEY_BYTES=8, _VALUE_BYTES=32, MAX_METADATA_BYTES=100)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService(SMALL);
  });
  after(() => service.close());

  const job = (metadata: unknown) => ({ ...IMAGE, prompt: MARKER, metadata });

  const rows: { name: string; fits: unknown; over: unknown; message: RegExp }[] = [
    { name: "4 keys / 5 keys", fits: { a: 1, b: 2, c: 3, d: 4 }, over: { a: 1, b: 2, c: 3, d: 4, e: 5 }, message: /^metadata has more than 4 keys$/ },
    { name: "a key of 8 bytes / 9 bytes", fits: { "éééé": 1 }, over: { "éééé1": 1 }, message: /^metadata key "éééé1" is longer than 8 bytes of UTF-8$/ },
    { name: "a value of 32 bytes of JSON / 33", fits: { a: "x".repeat(30) }, over: { a: "x".repeat(31) }, message: /^metadata\.a is more than 32 bytes as JSON$/ },
    { name: "a value with escapes of 32 bytes of JSON / 33", fits: { a: '"'.repeat(15) }, over: { a: `${'"'.repeat(15)}x` }, message: /^metadata\.a is more than 32 bytes as JSON$/ },
    // {"a":"x…"(30),"b":"y…"(30),"c":"z…"(22)} is 100 bytes.
    { name: "100 bytes of JSON in all / 101", fits: { a: "x".repeat(28), b: "y".repeat(28), c: "z".repeat(22) }, over: { a: "x".repeat(28), b: "y".repeat(28), c: "z".repeat(23) }, message: /^metadata is more than 100 bytes as JSON$/ },
  ];
  for (const row of rows) {
    it(`when metadata has ${row.name}, then 202 / 422 metadata_too_large naming the limit`, async () => {
      const customer = await createCustomer(service);
      const over = await postGeneration(service, customer.apiKey, job(row.over));
      assertPlatformError(over, 422, "metadata_too_large");
      assert.match(over.json.error.message, row.message);
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
      const fits = await postGeneration(service, customer.apiKey, job(row.fits));
      assert.equal(fits.status, 202, fits.text);
    });
  }

  for (const [kind, open, close] of [["arrays", "[", "]"], ["objects", '{"k":', "}"]] as const) {
    it(`when metadata nests 100 000 ${kind}, then 422 metadata_too_large, never a 500, and the service still answers`, async () => {
      const customer = await createCustomer(service);
      const response = await call(service, "POST", "/api/v1/generations", {
        key: customer.apiKey, rawBody: rawJob(`{"a":${nest(100_000, open, close)}}`), headers: { "content-type": "application/json" },
      });
      assertPlatformError(response, 422, "metadata_too_large");
      assert.equal((await call(service, "GET", "/healthz")).status, 200);
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
    });
  }

  it("when metadata is not an object, then 422", async () => {
    const customer = await createCustomer(service);
    for (const metadata of [[1, 2], "text", 5]) {
      const response = await postGeneration(service, customer.apiKey, job(metadata));
      assert.equal(response.status, 422, response.text);
    }
  });
});

describe("limits at their defaults", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("when an image prompt has 32 KiB, then 202; 32 KiB and one byte, then 422 prompt_too_long", async () => {
    const customer = await createCustomer(service);
    assertPlatformError(await postGeneration(service, customer.apiKey, { ...IMAGE, prompt: prompt(32 * 1024 + 1) }), 422, "prompt_too_long");
    assert.equal((await postGeneration(service, customer.apiKey, { ...IMAGE, prompt: prompt(32 * 1024) })).status, 202);
  });

  it("when metadata nests 32 levels (within 4 KiB a value), then 202; 33 levels, then 422 metadata_too_large", async () => {
    const customer = await createCustomer(service);
    const send = (json: string) =>
      call(service, "POST", "/api/v1/generations", { key: customer.apiKey, rawBody: rawJob(json), headers: { "content-type": "application/json" } });
    for (const [open, close] of [["[", "]"], ['{"k":', "}"]]) {
      const over = await send(`{"a":${nest(32, open!, close!)}}`);
      assertPlatformError(over, 422, "metadata_too_large");
      assert.match(over.json.error.message, /more than 32 levels deep/);
      const at = await send(`{"a":${nest(31, open!, close!)}}`);
      assert.equal(at.status, 202, at.text);
    }
  });

  // 3 MiB of metadata: refused by its key count (MAX_METADATA_KEYS) with nothing held. A body past the 4 MiB a refused
  // body is discarded might meet a reset before its answer; megabytes refused while streaming: edge-body-admission.test's 8 MiB case.
  it("when metadata has 200,000 keys, then 422 metadata_too_large, and nothing is charged", async (t) => {
    const customer = await createCustomer(service);
    const metadata: Record<string, number> = {};
    for (let i = 0; i < 200_000; i++) metadata[`k${i}`] = i;
    const body = JSON.stringify(job(metadata));
    const response = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, rawBody: body, headers: { "content-type": "application/json" } });
    t.diagnostic(`${(body.length / 1024 / 1024).toFixed(1)} MiB of metadata answered ${response.status}`);
    assertPlatformError(response, 422, "metadata_too_large");
    await assertBalance(service, customer.apiKey, FRESH_BALANCE);
  });

  function job(metadata: unknown) {
    return { ...IMAGE, prompt: MARKER, metadata };
  }
});
