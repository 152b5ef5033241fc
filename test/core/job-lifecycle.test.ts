// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import {
  balanceOf, call, createCustomer, eventually, finishedJob, pico, startTestService, TERMINAL, type TestService,
} from "../support/harness.js";
import { probeMp4, probePng } from "../support/media-probe.js";
import {
  assertBalance, assertPlatformError, closedPortUrl, download, expectedImageSize, FRESH_BALANCE, postGeneration,
  startLocalServer, tinyPng, UUID, type LocalServer,
} from "../support/jobs-api-helpers.js";

/*
 * Job states and transitions (spec sections 2.3, 2.4, 3) through the real
 * gateway: creation, polling, results and their signed links, and every
 * failure path with its reservation released.
 */

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const PNG_BYTES = tinyPng(16, 16);

const imageBody = (fields: Record<string, unknown> = {}) => ({
  model: "aimodel-3-pro-image", prompt: "a red fox in snow", aspect_ratio: "1:1", resolution: "1K", ...fields,
});

/** Serves a PNG under /ok.png and 404 for everything else. */
async function startImageServer(): Promise<LocalServer> {
  return startLocalServer((request, response) => {
    if (request.url?.startsWith("/ok.png")) {
      response.writeHead(200, { "content-type": "image/png", "content-length": String(PNG_BYTES.length) });
      response.end(PNG_BYTES);
    } else {
      response.writeHead(404, { "content-type": "text/plain" });
      response.end("not here");
    }
  });
}

async function createJob(service: TestService, key: string, body: unknown): Promise<string> {
  const created = await postGeneration(service, key, body);
  assert.equal(created.status, 202, created.text);
  return created.json.job_id;
}

/*
 * The timeout case needs ~30 s of wall time; its job is created here, before
 * the other suites run, so that the wait overlaps them instead of adding to them.
 */
let slowService: TestService;
let slowCustomer: { apiKey: string };
let slowJobId: string;
before(async () => {
  slowService = await startTestService({ SIMULATED_LATENCY_MS: "7000" });
  slowCustomer = await createCustomer(slowService);
  slowJobId = await createJob(slowService, slowCustomer.apiKey, imageBody({ prompt: "a glacier [simulate:slow]", timeout: 30 }));
});
after(() => slowService.close());

describe("job lifecycle (SIMULATED_LATENCY_MS=400)", () => {
  let service: TestService;
  let images: LocalServer;
  before(async () => {
    service = await startTestService({ SIMULATED_LATENCY_MS: "400" });
    images = await startImageServer();
  });
  after(async () => {
    await images.close();
    await service.close();
  });

  it("answers 202 with exactly job_id (a UUID), status queued and status_url, plus a Location header", async () => {
    const customer = await createCustomer(service);
    const created = await postGeneration(service, customer.apiKey, imageBody());
    assert.equal(created.status, 202);
    assert.deepEqual(Object.keys(created.json).sort(), ["job_id", "status", "status_url"]);
    assert.match(created.json.job_id, UUID);
    assert.equal(created.json.status, "queued");
    assert.equal(created.json.status_url, `/api/v1/jobs/${created.json.job_id}`);
    assert.equal(created.headers.get("location"), created.json.status_url);
    const job = await call(service, "GET", created.json.status_url, { key: customer.apiKey });
    assert.equal(job.status, 200);
    assert.equal(job.json.job_id, created.json.job_id);
  });

  describe("observed states", () => {
    /** Every distinct snapshot of a job from creation to its end, polled as fast as sensible. */
    async function snapshots(key: string, jobId: string) {
      const seen: any[] = [];
      await eventually(
        () => call(service, "GET", `/api/v1/jobs/${jobId}`, { key }),
        (r) => {
          assert.equal(r.status, 200, r.text);
          if (seen.at(-1)?.status !== r.json.status) seen.push(r.json);
          return TERMINAL.has(r.json.status);
        },
        { timeoutMs: 10_000, intervalMs: 5, what: `job ${jobId} to finish` },
      );
      return seen;
    }

    it("shows a job queued, with started_at and finished_at null, before it is processed", async () => {
      const customer = await createCustomer(service);
      const seen = await snapshots(customer.apiKey, await createJob(service, customer.apiKey, imageBody()));
      const queued = seen.find((job) => job.status === "queued");
      assert.ok(queued, `queued was never observable through GET job; saw ${seen.map((j) => j.status).join(" → ")}`);
      assert.equal(queued.started_at, null);
      assert.equal(queued.finished_at, null);
      assert.equal(queued.result, null);
      assert.equal(queued.error, null);
      assert.match(queued.created_at, ISO);
    });

    it("moves forward only (queued → processing → done) with created_at ≤ started_at ≤ finished_at", async () => {
      const customer = await createCustomer(service);
      const seen = await snapshots(customer.apiKey, await createJob(service, customer.apiKey, imageBody()));
      const order = ["queued", "processing", "done"];
      const indexes = seen.map((job) => order.indexOf(job.status));
      assert.ok(indexes.every((index, i) => index >= 0 && (i === 0 || index > indexes[i - 1]!)), `states went ${seen.map((j) => j.status).join(" → ")}`);
      const processing = seen.find((job) => job.status === "processing");
      assert.ok(processing, `processing never observed; saw ${seen.map((j) => j.status).join(" → ")}`);
      assert.match(processing.started_at, ISO);
      assert.equal(processing.finished_at, null);
      assert.equal(processing.result, null);
      assert.equal(processing.error, null);
      const done = seen.at(-1);
      assert.equal(done.status, "done");
      for (const field of ["created_at", "started_at", "finished_at"]) assert.match(done[field], ISO, field);
      assert.equal(done.created_at, processing.created_at);
      assert.equal(done.started_at, processing.started_at);
      const [created, started, finished] = [done.created_at, done.started_at, done.finished_at].map((t: string) => Date.parse(t));
      assert.ok(created! <= started! && started! <= finished!, `${done.created_at} ≤ ${done.started_at} ≤ ${done.finished_at}`);
      // The simulated latency happens between start and finish.
      assert.ok(finished! - started! >= 300, `processed in ${finished! - started!} ms`);
    });
  });

  describe("results", () => {
    it("gives an image-only result with text null, a PNG link and error null", async () => {
      const customer = await createCustomer(service);
      const job = await finishedJob(service, customer.apiKey, await createJob(service, customer.apiKey, imageBody()));
      assert.equal(job.status, "done");
      assert.equal(job.error, null);
      assert.equal(job.result.text, null);
      assert.equal(job.result.mime_type, "image/png");
      const file = await download(job.result.image_url);
      assert.equal(file.status, 200);
      assert.equal(file.contentType, "image/png");
      assert.deepEqual(probePng(file.bytes), { width: 1024, height: 1024 });
      await assertBalance(service, customer.apiKey, { balance: "9.866", reserved: "0.00", available: "9.866" });
    });

    it("gives image_url null and the text when the model answers text only", async () => {
      const customer = await createCustomer(service);
      const job = await finishedJob(service, customer.apiKey, await createJob(service, customer.apiKey, imageBody({ prompt: "describe a fox [simulate:text-only]" })));
      assert.equal(job.status, "done");
      assert.equal(job.result.image_url, null);
      assert.equal(typeof job.result.text, "string");
      assert.ok(job.result.text.length > 0);
    });

    it("gives both the image link and the text when the model answers with both", async () => {
      const customer = await createCustomer(service);
      const job = await finishedJob(service, customer.apiKey, await createJob(service, customer.apiKey, imageBody({ prompt: "a fox, captioned [simulate:with-text]" })));
      assert.equal(job.status, "done");
      assert.equal(typeof job.result.text, "string");
      assert.ok(job.result.text.length > 0);
      const file = await download(job.result.image_url);
      assert.equal(file.status, 200);
      assert.deepEqual(probePng(file.bytes), { width: 1024, height: 1024 });
    });

    it("signs result.image_url anew on every poll, and every link works", async () => {
      const customer = await createCustomer(service);
      const jobId = await createJob(service, customer.apiKey, imageBody());
      const first = (await finishedJob(service, customer.apiKey, jobId)).result.image_url as string;
      // Expiries have one-second granularity: poll until the clock has moved on.
      const later = await eventually(
        () => call(service, "GET", `/api/v1/jobs/${jobId}`, { key: customer.apiKey }),
        (r) => r.json.result.image_url !== first,
        { timeoutMs: 5_000, intervalMs: 100, what: "a newly signed result URL" },
      );
      const second = later.json.result.image_url as string;
      assert.notEqual(new URL(second).searchParams.get("signature"), new URL(first).searchParams.get("signature"));
      assert.ok(Number(new URL(second).searchParams.get("expires")) > Number(new URL(first).searchParams.get("expires")));
      const [a, b] = await Promise.all([download(first), download(second)]);
      assert.equal(a.status, 200);
      assert.equal(b.status, 200);
      assert.deepEqual(a.bytes, b.bytes);
    });

    it("refuses a result link with an altered signature with 403 link_bad_signature", async () => {
      const customer = await createCustomer(service);
      const job = await finishedJob(service, customer.apiKey, await createJob(service, customer.apiKey, imageBody()));
      const url = new URL(job.result.image_url);
      const signature = url.searchParams.get("signature")!;
      url.searchParams.set("signature", (signature[0] === "0" ? "1" : "0") + signature.slice(1));
      const tampered = await download(url.href);
      assert.equal(tampered.status, 403);
      assert.equal(tampered.json?.error?.code, "link_bad_signature");
      // Pushing the expiry out without re-signing is the same forgery.
      const extended = new URL(job.result.image_url);
      extended.searchParams.set("expires", String(Number(extended.searchParams.get("expires")) + 3600));
      assert.equal((await download(extended.href)).status, 403);
      assert.equal((await download(job.result.image_url)).status, 200);
    });

    const sizes: Array<{ model: string; aspect_ratio: string; resolution: string; expected?: { width: number; height: number } }> = [
      { model: "aimodel-3-pro-image", aspect_ratio: "16:9", resolution: "1K" },
      { model: "aimodel-3-pro-image", aspect_ratio: "1:1", resolution: "2K" },
      { model: "aimodel-3.1-flash-image", aspect_ratio: "9:16", resolution: "4K" },
      { model: "aimodel-3-pro-image", aspect_ratio: "1:8", resolution: "2K" },
      { model: "aimodel-3.1-flash-image", aspect_ratio: "auto", resolution: "1K" },
      { model: "aimodel-nbx-2.1", aspect_ratio: "21:9", resolution: "2K" },
      // The fast model ignores resolution: always 1K.
      { model: "aimodel-2.5-flash-image", aspect_ratio: "16:9", resolution: "4K", expected: expectedImageSize("16:9", "1K") },
      { model: "aimodel-2.5-flash-image", aspect_ratio: "9:16", resolution: "2K", expected: expectedImageSize("9:16", "1K") },
    ];
    for (const size of sizes) {
      const expected = size.expected ?? expectedImageSize(size.aspect_ratio, size.resolution);
      it(`renders ${size.model} ${size.aspect_ratio} at ${size.resolution} as a ${expected.width}x${expected.height} PNG`, async () => {
        const customer = await createCustomer(service);
        const job = await finishedJob(service, customer.apiKey, await createJob(service, customer.apiKey, { prompt: "a harbor at noon", ...size }));
        assert.equal(job.status, "done", JSON.stringify(job));
        const file = await download(job.result.image_url);
        assert.equal(file.contentType, "image/png");
        assert.deepEqual(probePng(file.bytes), expected);
      });
    }

    it("makes a 4-second 720p video job into an MP4 of 1280x720 and 4 s, linked from result.image_url", async () => {
      const customer = await createCustomer(service);
      const jobId = await createJob(service, customer.apiKey, {
        model: "videomodel-3.1-generate-001", prompt: "waves on a beach", resolution: "720p", duration_seconds: 4,
      });
      const job = await finishedJob(service, customer.apiKey, jobId, 60_000);
      assert.equal(job.status, "done", JSON.stringify(job));
      assert.equal(job.result.mime_type, "video/mp4");
      const file = await download(job.result.image_url);
      assert.equal(file.status, 200);
      assert.equal(file.contentType, "video/mp4");
      const probe = await probeMp4(file.bytes);
      assert.equal(probe.width, 1280);
      assert.equal(probe.height, 720);
      assert.ok(Math.abs(probe.durationSeconds - 4) < 0.01, `duration ${probe.durationSeconds}`);
      assert.match(probe.codec, /^avc/);
      // 0.40 per second × 4 s, charged on success.
      await assertBalance(service, customer.apiKey, { balance: "8.40", reserved: "0.00", available: "8.40" });
    });
  });

  describe("GET job visibility", () => {
    it("answers 404 for another account's job", async () => {
      const owner = await createCustomer(service);
      const other = await createCustomer(service);
      const jobId = await createJob(service, owner.apiKey, imageBody());
      assertPlatformError(await call(service, "GET", `/api/v1/jobs/${jobId}`, { key: other.apiKey }), 404, "job_not_found");
      assert.equal((await call(service, "GET", `/api/v1/jobs/${jobId}`, { key: owner.apiKey })).status, 200);
    });

    it("answers 404 for an unknown UUID", async () => {
      const customer = await createCustomer(service);
      assertPlatformError(await call(service, "GET", `/api/v1/jobs/${randomUUID()}`, { key: customer.apiKey }), 404, "job_not_found");
    });

    it("answers 404 for a job id that is not a UUID", async () => {
      const customer = await createCustomer(service);
      for (const id of ["not-a-uuid", "12345", "..%2F..%2Fbalance"]) {
        const response = await call(service, "GET", `/api/v1/jobs/${id}`, { key: customer.apiKey });
        assert.equal(response.status, 404, `${id}: ${response.text}`);
        assert.equal(typeof response.json?.error?.code, "string");
      }
    });
  });

  describe("failures release the reservation", () => {
    it("fails a job with error generation_failed when the provider fails, and charges nothing", async () => {
      const customer = await createCustomer(service);
      const jobId = await createJob(service, customer.apiKey, imageBody({ prompt: "a fox [simulate:fail]" }));
      const during = await balanceOf(service, customer.apiKey);
      assert.equal(during.reserved, "0.134");
      const job = await finishedJob(service, customer.apiKey, jobId);
      assert.equal(job.status, "failed");
      assert.equal(job.error, "generation_failed");
      assert.equal(job.result, null);
      assert.match(job.finished_at, ISO);
      assert.equal(job.usage.charged, "0.00");
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
    });

    it("accepts an input URL that answers 404, then fails the job with missing_input_images and releases the money", async () => {
      const customer = await createCustomer(service);
      const created = await postGeneration(service, customer.apiKey, imageBody({ input_images_urls: [`${images.url}/missing.png`] }));
      assert.equal(created.status, 202, created.text);
      const job = await finishedJob(service, customer.apiKey, created.json.job_id);
      assert.equal(job.status, "failed");
      assert.equal(job.error, "missing_input_images");
      assert.ok(images.hits.includes("/missing.png"), "the input URL was never fetched");
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
    });

    it("accepts an input URL on a closed port, then fails the job with missing_input_images and releases the money", async () => {
      const customer = await createCustomer(service);
      const created = await postGeneration(service, customer.apiKey, imageBody({ input_images_urls: [await closedPortUrl()] }));
      assert.equal(created.status, 202, created.text);
      const job = await finishedJob(service, customer.apiKey, created.json.job_id);
      assert.equal(job.status, "failed");
      assert.equal(job.error, "missing_input_images");
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
    });

    it("fails the whole job when one of several input URLs cannot be fetched", async () => {
      const customer = await createCustomer(service);
      const job = await finishedJob(service, customer.apiKey, await createJob(service, customer.apiKey, imageBody({
        input_images_urls: [`${images.url}/ok.png?a`, `${images.url}/missing.png?b`],
      })));
      assert.equal(job.status, "failed");
      assert.equal(job.error, "missing_input_images");
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
    });

    it("completes a job whose input URL serves a PNG, fetching it", async () => {
      const customer = await createCustomer(service);
      const job = await finishedJob(service, customer.apiKey, await createJob(service, customer.apiKey, imageBody({
        input_images_urls: [`${images.url}/ok.png?fetched`],
      })));
      assert.equal(job.status, "done", JSON.stringify(job));
      assert.ok(images.hits.includes("/ok.png?fetched"));
      assert.equal((await download(job.result.image_url)).status, 200);
      await assertBalance(service, customer.apiKey, { balance: "9.866", reserved: "0.00", available: "9.866" });
    });
  });

  describe("text jobs", () => {
    it("finishes a text job with result.text and usage, charging 0.30/M prompt + 2.50/M candidate tokens exactly", async () => {
      const customer = await createCustomer(service);
      const prompt = "Write two sentences about copper kettles and rainy afternoons.";
      const jobId = await createJob(service, customer.apiKey, { model: "aimodel-3.5-flash", prompt, aspect_ratio: "auto", resolution: "1K" });
      const job = await finishedJob(service, customer.apiKey, jobId);
      assert.equal(job.status, "done");
      assert.equal(job.model, "aimodel-3.5-flash");
      assert.equal(job.result.image_url, null);
      assert.ok(job.result.text.length > 0);
      const { prompt_token_count: promptTokens, candidates_token_count: candidates, total_token_count: total } = job.usage;
      assert.equal(promptTokens, Math.ceil(Buffer.byteLength(prompt) / 4));
      assert.equal(candidates, Math.ceil(Buffer.byteLength(job.result.text) / 4));
      assert.ok(promptTokens > 0 && candidates > 0);
      assert.equal(total, promptTokens + candidates);
      const numerator = pico("0.30") * BigInt(promptTokens) + pico("2.50") * BigInt(candidates);
      assert.equal(numerator % 1_000_000n, 0n, "the charge is not a whole number of picodollars");
      const charged = numerator / 1_000_000n;
      assert.equal(pico(job.usage.charged), charged);
      // The reservation was the estimate with 8192 output tokens; only the usage stays charged.
      assert.equal(pico(job.usage.reserved), (pico("0.30") * BigInt(promptTokens) + pico("2.50") * 8192n) / 1_000_000n);
      const balance = await balanceOf(service, customer.apiKey);
      assert.equal(pico(balance.balance), pico("10.00") - charged);
      assert.equal(pico(balance.reserved), 0n);
      assert.equal(pico(balance.available), pico("10.00") - charged);
    });
  });

  describe("deprecated alias routes", () => {
    const aliases = [
      { prefix: "/nb", model: "aimodel-2.5-flash-image" },
      { prefix: "/nb2", model: "aimodel-3.1-flash-image" },
      { prefix: "", model: "aimodel-3-pro-image" },
    ];
    for (const { prefix, model } of aliases) {
      it(`creates a ${model} job through POST /api/v1${prefix}/text-generations with Deprecation: true`, async () => {
        const customer = await createCustomer(service);
        const created = await call(service, "POST", `/api/v1${prefix}/text-generations`, {
          key: customer.apiKey, body: { prompt: "a paper lantern", aspect_ratio: "1:1", resolution: "1K" },
        });
        assert.equal(created.status, 202, created.text);
        assert.equal(created.headers.get("deprecation"), "true");
        assert.equal(created.json.status_url, `/api/v1/jobs/${created.json.job_id}`);
        const job = await finishedJob(service, customer.apiKey, created.json.job_id);
        assert.equal(job.model, model);
        assert.equal(job.status, "done");
      });

      it(`creates a ${model} job through POST /api/v1${prefix}/url-generations with Deprecation: true`, async () => {
        const customer = await createCustomer(service);
        const created = await call(service, "POST", `/api/v1${prefix}/url-generations`, {
          key: customer.apiKey, body: { prompt: "restyle this", input_images_urls: [`${images.url}/ok.png?alias${prefix}`], aspect_ratio: "1:1", resolution: "1K" },
        });
        assert.equal(created.status, 202, created.text);
        assert.equal(created.headers.get("deprecation"), "true");
        const job = await finishedJob(service, customer.apiKey, created.json.job_id);
        assert.equal(job.model, model);
        assert.equal(job.status, "done", JSON.stringify(job));
        assert.ok(images.hits.includes(`/ok.png?alias${prefix}`));
      });
    }

    it("ignores a model named in the body of an alias route", async () => {
      const customer = await createCustomer(service);
      const created = await call(service, "POST", "/api/v1/nb2/text-generations", {
        key: customer.apiKey, body: { model: "aimodel-3-pro-image", prompt: "a paper lantern", aspect_ratio: "1:1", resolution: "1K" },
      });
      assert.equal(created.status, 202, created.text);
      const job = await call(service, "GET", created.json.status_url, { key: customer.apiKey });
      assert.equal(job.json.model, "aimodel-3.1-flash-image");
    });

    it("rejects input images on text-generations with 422 input_images_not_allowed", async () => {
      const customer = await createCustomer(service);
      for (const images of [{ input_images_urls: ["http://example.com/a.png"] }, { input_images_base64: [PNG_BYTES.toString("base64")] }]) {
        const response = await call(service, "POST", "/api/v1/nb/text-generations", {
          key: customer.apiKey, body: { prompt: "a paper lantern", aspect_ratio: "1:1", resolution: "1K", ...images },
        });
        assertPlatformError(response, 422, "input_images_not_allowed");
        assert.equal(response.headers.get("deprecation"), "true");
      }
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
    });

    it("rejects url-generations without input_images_urls with 422 missing_input_image_urls", async () => {
      const customer = await createCustomer(service);
      for (const extra of [{}, { input_images_urls: [] }, { input_images_base64: [PNG_BYTES.toString("base64")] }]) {
        const response = await call(service, "POST", "/api/v1/url-generations", {
          key: customer.apiKey, body: { prompt: "restyle this", aspect_ratio: "1:1", resolution: "1K", ...extra },
        });
        assertPlatformError(response, 422, "missing_input_image_urls");
      }
      await assertBalance(service, customer.apiKey, FRESH_BALANCE);
    });
  });
});

describe("result links expire (RESULT_URL_TTL_SECONDS=1)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ RESULT_URL_TTL_SECONDS: "1" });
  });
  after(() => service.close());

  it("refuses an expired result link with 403 link_expired while a fresh poll gives a working one", async () => {
    const customer = await createCustomer(service);
    const jobId = await createJob(service, customer.apiKey, imageBody());
    const job = await finishedJob(service, customer.apiKey, jobId);
    const expired = await eventually(
      () => download(job.result.image_url),
      (file) => file.status !== 200,
      { timeoutMs: 5_000, intervalMs: 100, what: "the result link to expire" },
    );
    assert.equal(expired.status, 403);
    assert.equal(expired.json?.error?.code, "link_expired");
    const again = await call(service, "GET", `/api/v1/jobs/${jobId}`, { key: customer.apiKey });
    const fresh = await download(again.json.result.image_url);
    assert.equal(fresh.status, 200);
    probePng(fresh.bytes);
  });
});

describe("private input URLs refused (ALLOW_PRIVATE_URLS=false)", () => {
  let service: TestService;
  let images: LocalServer;
  before(async () => {
    service = await startTestService({ ALLOW_PRIVATE_URLS: "false" });
    images = await startImageServer();
  });
  after(async () => {
    await images.close();
    await service.close();
  });

  it("accepts a loopback input URL, then fails the job with missing_input_images without fetching it", async () => {
    const customer = await createCustomer(service);
    const created = await postGeneration(service, customer.apiKey, imageBody({ input_images_urls: [`${images.url}/ok.png`] }));
    assert.equal(created.status, 202, created.text);
    const job = await finishedJob(service, customer.apiKey, created.json.job_id);
    assert.equal(job.status, "failed");
    assert.equal(job.error, "missing_input_images");
    assert.deepEqual(images.hits, []);
    await assertBalance(service, customer.apiKey, FRESH_BALANCE);
  });
});

describe("job timeout (SIMULATED_LATENCY_MS=7000, timeout 30)", () => {
  it("fails a job that overruns its timeout with error timeout and releases the reservation", async () => {
    const job = await finishedJob(slowService, slowCustomer.apiKey, slowJobId, 45_000);
    assert.equal(job.status, "failed");
    assert.equal(job.error, "timeout");
    const elapsed = Date.parse(job.finished_at) - Date.parse(job.started_at);
    assert.ok(elapsed >= 29_000 && elapsed < 35_000, `failed after ${elapsed} ms`);
    await assertBalance(slowService, slowCustomer.apiKey, FRESH_BALANCE);
  });
});
