// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { call, createCustomer, finishedJob, startTestService, type TestService } from "../support/harness.js";
import { assertBalance, assertPlatformError, FRESH_BALANCE, postGeneration, tinyPng, UUID } from "../support/jobs-api-helpers.js";

/*
 * Every validation rule of spec sections 2.2, 7 and 8 through POST /api/v1/generations.
 * Each row runs against a fresh account holding 10.00, so a rejected row can
 * prove it changed nothing by finding that balance intact.
 *
 * Accepted rows only prove acceptance: their prompts carry the simulator's fail
 * marker so that no 4K image or 8-second video is rendered in the background
 * (outputs are covered by job-lifecycle.test.ts).
 */
const ACCEPTED_PROMPT = "a lighthouse at dusk [simulate:fail]";

const LITE = "aimodel-3.1-flash-lite-image";
const KEY_MODELS = ["*", LITE];

interface Row {
  readonly name: string;
  readonly body?: Record<string, unknown>;
  readonly rawBody?: string;
  readonly status: number;
  readonly code?: string;
  /** For accepted rows: the canonical model the job records, and its reservation. */
  readonly model?: string;
  readonly reserved?: string;
}

const image = (fields: Record<string, unknown>) => ({ model: "aimodel-3-pro-image", prompt: ACCEPTED_PROMPT, aspect_ratio: "1:1", resolution: "1K", ...fields });
const video = (fields: Record<string, unknown>) => ({ model: "videomodel-3.1-generate-001", prompt: ACCEPTED_PROMPT, ...fields });
const urls = (n: number, base = "http://127.0.0.1:9/in") => Array.from({ length: n }, (_, i) => `${base}/${i}.png`);

const ROWS: Row[] = [
  // model
  { name: "an unknown model", body: image({ model: "aimodel-9-imaginary" }), status: 422, code: "unknown_model" },
  { name: "a missing model", body: { prompt: "x", aspect_ratio: "1:1", resolution: "1K" }, status: 422, code: "missing_model" },
  { name: "a text model id with a -preview suffix", body: { model: "aimodel-3.5-flash-preview", prompt: "hi" }, status: 422, code: "unknown_model" },
  { name: "the lite image model with a -preview suffix", body: image({ model: `${LITE}-preview` }), status: 422, code: "unknown_model" },
  { name: "the nbx model with a -preview suffix", body: image({ model: "aimodel-nbx-2.1-preview" }), status: 422, code: "unknown_model" },
  { name: "aimodel-2.5-flash-image-preview", body: image({ model: "aimodel-2.5-flash-image-preview" }), status: 202, model: "aimodel-2.5-flash-image", reserved: "0.039" },
  { name: "aimodel-3.1-flash-image-preview", body: image({ model: "aimodel-3.1-flash-image-preview" }), status: 202, model: "aimodel-3.1-flash-image", reserved: "0.067" },
  { name: "aimodel-3-pro-image-preview", body: image({ model: "aimodel-3-pro-image-preview" }), status: 202, model: "aimodel-3-pro-image", reserved: "0.134" },

  // prompt
  { name: "an empty prompt", body: image({ prompt: "" }), status: 422, code: "invalid_prompt" },
  { name: "a missing prompt", body: { model: "aimodel-3-pro-image", aspect_ratio: "1:1", resolution: "1K" }, status: 422, code: "invalid_prompt" },
  { name: "a prompt of only null bytes", body: image({ prompt: "\u0000\u0000\u0000" }), status: 422, code: "invalid_prompt" },
  { name: "a prompt with null bytes around text", body: image({ prompt: `\u0000${ACCEPTED_PROMPT}\u0000` }), status: 202, model: "aimodel-3-pro-image" },

  // aspect ratio
  ...["1:8", "8:1", "1:4", "4:1"].map((ratio): Row => ({
    name: `aspect_ratio ${ratio} on the fast model`, body: image({ model: "aimodel-2.5-flash-image", aspect_ratio: ratio }), status: 422, code: "unsupported_aspect_ratio",
  })),
  { name: "aspect_ratio 1:8 on aimodel-3-pro-image", body: image({ aspect_ratio: "1:8" }), status: 202, model: "aimodel-3-pro-image" },
  { name: "aspect_ratio 8:1 on aimodel-3.1-flash-image", body: image({ model: "aimodel-3.1-flash-image", aspect_ratio: "8:1" }), status: 202, model: "aimodel-3.1-flash-image" },
  { name: "aspect_ratio 16:9 on the fast model", body: image({ model: "aimodel-2.5-flash-image", aspect_ratio: "16:9" }), status: 202, model: "aimodel-2.5-flash-image" },
  { name: "an aspect_ratio no model knows (7:3)", body: image({ aspect_ratio: "7:3" }), status: 422, code: "unsupported_aspect_ratio" },
  { name: "aspect_ratio auto on an image model", body: image({ aspect_ratio: "auto" }), status: 202, model: "aimodel-3-pro-image" },

  // resolution
  { name: "resolution 2K on the lite model", body: image({ model: LITE, resolution: "2K" }), status: 422, code: "unsupported_resolution" },
  { name: "resolution 4K on the lite model", body: image({ model: LITE, resolution: "4K" }), status: 422, code: "unsupported_resolution" },
  { name: "resolution 1K on the lite model", body: image({ model: LITE, resolution: "1K" }), status: 202, model: LITE, reserved: "0.02" },
  { name: "the lite model without aspect_ratio", body: { model: LITE, prompt: ACCEPTED_PROMPT, resolution: "1K" }, status: 422, code: "missing_aspect_ratio" },
  { name: "the lite model without resolution", body: { model: LITE, prompt: ACCEPTED_PROMPT, aspect_ratio: "1:1" }, status: 422, code: "missing_resolution" },
  { name: "the nbx model without aspect_ratio", body: { model: "aimodel-nbx-2.1", prompt: ACCEPTED_PROMPT, resolution: "2K" }, status: 422, code: "missing_aspect_ratio" },
  { name: "the nbx model without resolution", body: { model: "aimodel-nbx-2.1", prompt: ACCEPTED_PROMPT, aspect_ratio: "1:1" }, status: 422, code: "missing_resolution" },
  { name: "the nbx model with both", body: image({ model: "aimodel-nbx-2.1", resolution: "2K" }), status: 202, model: "aimodel-nbx-2.1", reserved: "0.08" },
  { name: "resolution 4K on the fast model (ignored: priced as 1K)", body: image({ model: "aimodel-2.5-flash-image", resolution: "4K" }), status: 202, model: "aimodel-2.5-flash-image", reserved: "0.039" },
  { name: "a resolution no image model has (8K)", body: image({ resolution: "8K" }), status: 422, code: "unsupported_resolution" },
  { name: "resolution 4K on aimodel-3-pro-image", body: image({ resolution: "4K" }), status: 202, model: "aimodel-3-pro-image", reserved: "0.24" },

  // timeout
  { name: "timeout 29", body: image({ timeout: 29 }), status: 422, code: "invalid_timeout" },
  { name: "timeout 1201", body: image({ timeout: 1201 }), status: 422, code: "invalid_timeout" },
  { name: "timeout 0", body: image({ timeout: 0 }), status: 422, code: "invalid_timeout" },
  { name: "timeout 30", body: image({ timeout: 30 }), status: 202, model: "aimodel-3-pro-image" },
  { name: "timeout 1200", body: image({ timeout: 1200 }), status: 202, model: "aimodel-3-pro-image" },

  // input image URLs
  ...["ftp://example.com/a.png", "file:///etc/passwd", "example.com/a.png", "javascript:alert(1)", "data:image/png;base64,AAAA", ""].map((url): Row => ({
    name: `input URL ${JSON.stringify(url)}`, body: image({ input_images_urls: [url] }), status: 422, code: "invalid_input_image_url",
  })),
  { name: "one bad URL among good ones", body: image({ input_images_urls: [...urls(3), "ftp://example.com/a.png"] }), status: 422, code: "invalid_input_image_url" },
  { name: "101 input URLs", body: image({ input_images_urls: urls(101) }), status: 422, code: "too_many_input_images" },
  { name: "100 input URLs", body: image({ input_images_urls: urls(100) }), status: 202, model: "aimodel-3-pro-image" },
  { name: "an https input URL", body: image({ input_images_urls: ["https://127.0.0.1:9/a.png"] }), status: 202, model: "aimodel-3-pro-image" },

  // inline images
  { name: "input_images_base64 that is not base64", body: image({ input_images_base64: ["not base64!!"] }), status: 422, code: "invalid_input_image" },
  { name: "an empty input_images_base64 entry", body: image({ input_images_base64: [""] }), status: 422, code: "invalid_input_image" },
  { name: "a base64 PNG", body: image({ input_images_base64: [tinyPng().toString("base64")] }), status: 202, model: "aimodel-3-pro-image" },
  { name: "a base64 data URI", body: image({ input_images_base64: [`data:image/png;base64,${tinyPng().toString("base64")}`] }), status: 202, model: "aimodel-3-pro-image" },

  // JSON
  { name: "malformed JSON", rawBody: '{"model": "aimodel-3-pro-image", "prompt": ', status: 400, code: "invalid_json" },
  { name: "prompt of the wrong JSON type", body: image({ prompt: 5 }), status: 422, code: "validation_failed" },
  { name: "input_images_urls that is not an array", body: image({ input_images_urls: "http://example.com/a.png" }), status: 422, code: "validation_failed" },
  { name: "a JSON array as the body", rawBody: "[]", status: 422, code: "validation_failed" },

  // video
  { name: "a 3-second 720p video", body: video({ resolution: "720p", duration_seconds: 3 }), status: 422, code: "invalid_duration" },
  { name: "a 9-second 720p video", body: video({ resolution: "720p", duration_seconds: 9 }), status: 422, code: "invalid_duration" },
  ...[4, 5, 6, 7].flatMap((seconds) => ["1080p", "4k"].map((resolution): Row => ({
    name: `a ${seconds}-second ${resolution} video`, body: video({ resolution, duration_seconds: seconds }), status: 400, code: "video_duration_requires_8s",
  }))),
  { name: "a 4-second 720p video", body: video({ resolution: "720p", duration_seconds: 4 }), status: 202, model: "videomodel-3.1-generate-001", reserved: "1.60" },
  { name: "an 8-second 720p video", body: video({ resolution: "720p", duration_seconds: 8 }), status: 202, model: "videomodel-3.1-generate-001", reserved: "3.20" },
  { name: "an 8-second 1080p video", body: video({ resolution: "1080p", duration_seconds: 8 }), status: 202, model: "videomodel-3.1-generate-001", reserved: "3.20" },
  { name: "an 8-second 4k video", body: video({ resolution: "4k", duration_seconds: 8 }), status: 202, model: "videomodel-3.1-generate-001", reserved: "4.80" },
  // "1K" is the legacy name of 720p: 5 seconds is allowed (it would be 400 at 1080p) and priced at the 720p rate.
  { name: "a 5-second video at resolution 1K", body: video({ resolution: "1K", duration_seconds: 5 }), status: 202, model: "videomodel-3.1-generate-001", reserved: "2.00" },

  // text through the jobs API, as the spec's example sends it
  { name: "a text model with aspect_ratio auto and resolution 1K", body: { model: "aimodel-3.5-flash", prompt: "hello [simulate:fail]", aspect_ratio: "auto", resolution: "1K" }, status: 202, model: "aimodel-3.5-flash" },
];

describe("POST /api/v1/generations validation (default limits)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  for (const row of ROWS) {
    const verb = row.status === 202 ? "accepts" : `rejects`;
    const outcome = row.status === 202 ? "with 202" : `with ${row.status} ${row.code}`;
    it(`${verb} ${row.name} ${outcome}`, async () => {
      const customer = await createCustomer(service, "10.00", KEY_MODELS);
      const response = await call(service, "POST", "/api/v1/generations", {
        key: customer.apiKey,
        ...(row.rawBody !== undefined ? { rawBody: row.rawBody, headers: { "content-type": "application/json" } } : { body: row.body }),
      });
      if (row.status !== 202) {
        assertPlatformError(response, row.status, row.code!);
        await assertBalance(service, customer.apiKey, FRESH_BALANCE);
        return;
      }
      assert.equal(response.status, 202, response.text);
      assert.match(response.json.job_id, UUID);
      const job = await call(service, "GET", `/api/v1/jobs/${response.json.job_id}`, { key: customer.apiKey });
      assert.equal(job.status, 200, job.text);
      assert.equal(job.json.model, row.model);
      if (row.reserved) assert.equal(job.json.usage.reserved, row.reserved);
    });
  }

  it("strips null bytes from the prompt and generates from what is left", async () => {
    const customer = await createCustomer(service);
    const created = await postGeneration(service, customer.apiKey, { model: "aimodel-3.5-flash", prompt: "sun\u0000flower\u0000" });
    assert.equal(created.status, 202, created.text);
    const job = await finishedJob(service, customer.apiKey, created.json.job_id);
    assert.equal(job.status, "done");
    // The simulated answer quotes the prompt it received.
    assert.ok(job.result.text.includes('"sunflower"'), job.result.text);
    assert.ok(!job.result.text.includes("\u0000"));
    // ceil(9 bytes / 4): the null bytes are not counted either.
    assert.equal(job.usage.prompt_token_count, 3);
  });

  it("rejects a body over the real 200 MiB input limit with 422 input_too_large, not a dropped connection", async (t) => {
    const customer = await createCustomer(service);
    // 4k base64 characters decode to 3k bytes: the smallest k with 3k > 200 MiB.
    const k = Math.floor((200 * 1024 * 1024) / 3) + 1;
    const prefix = Buffer.from(JSON.stringify({ model: "aimodel-3-pro-image", prompt: "big", aspect_ratio: "1:1", resolution: "1K" }).slice(0, -1) + ',"input_images_base64":["');
    const suffix = Buffer.from('"]}');
    const body = Buffer.alloc(prefix.length + 4 * k + suffix.length, "A");
    prefix.copy(body, 0);
    suffix.copy(body, body.length - suffix.length);
    const started = performance.now();
    const response = await fetch(`${service.url}/api/v1/generations`, {
      method: "POST",
      headers: { authorization: `Bearer ${customer.apiKey}`, "content-type": "application/json" },
      body,
    });
    const text = await response.text();
    const elapsedMs = performance.now() - started;
    t.diagnostic(`${(body.length / 1024 / 1024).toFixed(1)} MiB body answered ${response.status} in ${elapsedMs.toFixed(0)} ms`);
    assertPlatformError({ status: response.status, headers: response.headers, json: JSON.parse(text), text }, 422, "input_too_large");
    assert.ok(elapsedMs < 30_000, `took ${elapsedMs} ms`);
    await assertBalance(service, customer.apiKey, FRESH_BALANCE);
  });
});

describe("POST /api/v1/generations validation (MAX_INPUT_IMAGES=30, MAX_INPUT_BYTES=1000)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ MAX_INPUT_IMAGES: "30", MAX_INPUT_BYTES: "1000" });
  });
  after(() => service.close());

  const bytes = (n: number) => Buffer.alloc(n, 0x5a).toString("base64");
  const limitedRows: Row[] = [
    { name: "31 input URLs", body: image({ input_images_urls: urls(31) }), status: 422, code: "too_many_input_images" },
    { name: "30 input URLs", body: image({ input_images_urls: urls(30) }), status: 202, model: "aimodel-3-pro-image" },
    { name: "29 URLs plus 2 inline images (31 in all)", body: image({ input_images_urls: urls(29), input_images_base64: [bytes(10), bytes(10)] }), status: 422, code: "too_many_input_images" },
    { name: "1001 decoded bytes of base64", body: image({ input_images_base64: [bytes(1001)] }), status: 422, code: "input_too_large" },
    { name: "1001 decoded bytes as a data URI", body: image({ input_images_base64: [`data:image/png;base64,${bytes(1001)}`] }), status: 422, code: "input_too_large" },
    { name: "two images of 600 bytes (1200 combined)", body: image({ input_images_base64: [bytes(600), bytes(600)] }), status: 422, code: "input_too_large" },
    { name: "exactly 1000 decoded bytes", body: image({ input_images_base64: [bytes(1000)] }), status: 202, model: "aimodel-3-pro-image" },
  ];

  for (const row of limitedRows) {
    it(`${row.status === 202 ? "accepts" : "rejects"} ${row.name} ${row.status === 202 ? "with 202" : `with ${row.status} ${row.code}`}`, async () => {
      const customer = await createCustomer(service);
      const response = await postGeneration(service, customer.apiKey, row.body);
      if (row.status !== 202) {
        assertPlatformError(response, row.status, row.code!);
        await assertBalance(service, customer.apiKey, FRESH_BALANCE);
        return;
      }
      assert.equal(response.status, 202, response.text);
      const job = await call(service, "GET", `/api/v1/jobs/${response.json.job_id}`, { key: customer.apiKey });
      assert.equal(job.json.model, row.model);
    });
  }
});
