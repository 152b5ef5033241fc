// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { balanceOf, call, createCustomer, eventually, finishedJob, pico, startTestService, type TestService } from "../support/harness.js";
import { parseExposition, valueOf } from "../support/exposition.js";
import { probeMp4, probePng } from "../support/media-probe.js";
import { assertPlatformError, download, postGeneration, startLocalServer, tinyPng, type LocalServer } from "../support/jobs-api-helpers.js";
import { bearer, grpcAddress, loadGrpcPackage, unary } from "../support/rpc-helpers.js";
import {
  answerText, chargeFor, collectGarbage, onlyRequest, perMillion, refusedOrigin, requestsSince, seenBy, settledCharge, sseEvents, textTokensOf,
  userParts, videoTokensOf, writeRoutesFile, type RouteEntry, type TokenPrices,
} from "../support/upstream-helpers.js";
import { streamRequest, userTurn, VENDOR } from "../support/vendor-helpers.js";
import {
  OMNI_VIDEO_TOKENS, startVendorStub, stubAnswer, stubImageCaption, stubTextChunks, stubTokens, THOUGHTS_TOKENS, VENDOR_KEY_HEADER,
  type UsageMetadata, type VendorStub,
} from "../support/vendor-stub.js";

/*
 * Issue 4: the service pointed at a server that speaks the vendor's API (the
 * stub in test/support/vendor-stub.ts, whose content and usage are pure
 * functions of the request). Everything on the service's side is real: the
 * gateway over HTTP, the core, the worker, the ledger and the blob store.
 * The oracle for money is the usage the stub reported times the published
 * prices of the decisions, never the service's own price file.
 */

const TEXT_PRICES: Record<string, TokenPrices> = {
  "aimodel-3-flash-preview": { input: "0.50", output: "3.00" },
  "aimodel-3.1-flash-lite": { input: "0.10", output: "0.40" },
  "aimodel-3.1-pro-preview": { input: "2.00", output: "12.00" },
  "aimodel-3.5-flash": { input: "0.30", output: "2.50" },
  "aimodel-3.5-flash-lite": { input: "0.10", output: "0.40" },
  "aimodel-3.6-flash": { input: "0.30", output: "2.50" },
  "aimodel-3.7-flash": { input: "0.30", output: "2.50" },
  "aimodel-omni-1.1-flash": { input: "0.50", output: "2.00", videoOutput: "12.00" },
};
const TEXT_MODELS = Object.keys(TEXT_PRICES).filter((m) => !m.includes("omni"));

const FLASH = "aimodel-3.5-flash";
const PRO_TEXT = "aimodel-3.1-pro-preview";
const OMNI = "aimodel-omni-1.1-flash";
const VIDEO = "videomodel-3.1-generate-001";
const FLASH_IMAGE = "aimodel-3.1-flash-image";
const LITE_IMAGE = "aimodel-3.1-flash-lite-image";
const VIDEO_PER_SECOND_720P = "0.40";
/** The lite image model is not covered by a "*" grant. */
const ALL_MODELS = ["*", LITE_IMAGE];

const INPUT_PNG = tinyPng(8, 8);
const INPUT_PNG_B64 = INPUT_PNG.toString("base64");

/** Serves the same small PNG under any path, for input_images_urls. */
const startImageServer = (): Promise<LocalServer> =>
  startLocalServer((_request, response) => {
    response.writeHead(200, { "content-type": "image/png", "content-length": String(INPUT_PNG.length) });
    response.end(INPUT_PNG);
  });

async function createJob(service: TestService, key: string, body: Record<string, unknown>): Promise<string> {
  const created = await postGeneration(service, key, body);
  assert.equal(created.status, 202, created.text);
  return created.json.job_id as string;
}

async function runJob(service: TestService, key: string, body: Record<string, unknown>, timeoutMs = 20_000) {
  return finishedJob(service, key, await createJob(service, key, body), timeoutMs);
}

const generateContent = (service: TestService, model: string, key: string, body: unknown) =>
  call(service, "POST", `${VENDOR}/models/${model}:generateContent`, { vendorKey: key, body });

/** A long prompt, so that the stub's answer streams in several events. */
const longPrompt = (topic: string) =>
  `Tell me slowly about ${topic}, the harbour, the gulls, the fishing boats, the tides, the old stone pier, the winter storms and the summer evenings`;

/** Reads an SSE response until its first complete event; the reader stays open. */
async function firstEvent(response: Response) {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  while (!/\r?\n\r?\n/.test(buffer)) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
  }
  return { event: sseEvents(buffer)[0], reader };
}

async function routesByName(service: TestService): Promise<Map<string, any>> {
  const response = await call(service, "GET", "/admin/v1/routes", { admin: true });
  assert.equal(response.status, 200, response.text);
  assert.ok(Array.isArray(response.json.routes), response.text);
  return new Map(response.json.routes.map((route: { name: string }) => [route.name, route]));
}

// ---------------------------------------------------------------------------------------------
// A route table (ROUTES_FILE): failover, pauses, per-route limits, the job's timeout

/*
 * Each scenario has its own model and its own pair of routes: "<name>-a" on
 * stub A (weight 1, so always drawn first) and "<name>-b" on stub B (weight 0:
 * standby). Separate routes keep one scenario's failures from making another's
 * primary "unhealthy" (three in a row), which would change the order.
 */
const SCENARIO = {
  f503: FLASH_IMAGE,
  f429: "aimodel-3-flash-preview",
  refused: "aimodel-2.5-flash-image",
  malformed: "aimodel-3.5-flash-lite",
  stall: "aimodel-3-pro-image",
  f400: "aimodel-3.1-flash-lite",
  sse: "aimodel-3.6-flash",
  sseStall: PRO_TEXT,
  drop: "aimodel-3.7-flash",
  paused: FLASH,
  small: "aimodel-nbx-2.1",
  slow: LITE_IMAGE,
} as const;
const STALL_TIMEOUT_MS = 1_000;
/** The job-timeout scenario: each route waits this long before giving up, so both are tried within the 30 s budget. */
const SLOW_ROUTE_TIMEOUT_MS = 20_000;

let stubA: VendorStub;
let stubB: VendorStub;
let slowA: VendorStub;
let slowB: VendorStub;
let routed: TestService;
let routesFile: { path: string; remove(): Promise<void> };
let routedImages: LocalServer;
let slowCustomer: { apiKey: string };
let slowJobId: string;

/*
 * The timeout case takes ~30 s of wall time; its job is created here, before
 * the other suites run, so that the wait overlaps them instead of adding to them.
 */
before(async () => {
  [stubA, stubB, slowA, slowB] = await Promise.all([
    startVendorStub({ apiKey: "route-a-key" }),
    startVendorStub({ apiKey: "route-b-key" }),
    startVendorStub({ apiKey: "slow-a-key" }),
    startVendorStub({ apiKey: "slow-b-key" }),
  ]);
  routedImages = await startImageServer();
  const pair = (name: string, model: string, first: Partial<RouteEntry> = {}): RouteEntry[] => [
    { name: `${name}-a`, base_url: stubA.url, api_key: stubA.apiKey, weight: 1, models: [model], ...first },
    { name: `${name}-b`, base_url: stubB.url, api_key: stubB.apiKey, weight: 0, models: [model] },
  ];
  routesFile = await writeRoutesFile([
    ...pair("f503", SCENARIO.f503),
    ...pair("f429", SCENARIO.f429),
    ...pair("refused", SCENARIO.refused, { base_url: await refusedOrigin(), api_key: "nobody-listens" }),
    ...pair("malformed", SCENARIO.malformed),
    ...pair("stall", SCENARIO.stall, { timeout_ms: STALL_TIMEOUT_MS }),
    ...pair("f400", SCENARIO.f400),
    ...pair("sse", SCENARIO.sse),
    ...pair("sse-stall", SCENARIO.sseStall, { timeout_ms: STALL_TIMEOUT_MS }),
    ...pair("drop", SCENARIO.drop),
    ...pair("paused", SCENARIO.paused),
    { name: "small", base_url: stubA.url, api_key: stubA.apiKey, max_input_images: 30, models: [SCENARIO.small] },
    { name: "slow-a", base_url: slowA.url, api_key: slowA.apiKey, weight: 1, timeout_ms: SLOW_ROUTE_TIMEOUT_MS, models: [SCENARIO.slow] },
    { name: "slow-b", base_url: slowB.url, api_key: slowB.apiKey, weight: 0, timeout_ms: SLOW_ROUTE_TIMEOUT_MS, models: [SCENARIO.slow] },
  ]);
  routed = await startTestService({ ROUTES_FILE: routesFile.path, UPSTREAM_POLL_INTERVAL: "50ms" });

  slowA.fault({ kind: "stall" }, { model: SCENARIO.slow });
  slowB.fault({ kind: "stall" }, { model: SCENARIO.slow });
  slowCustomer = await createCustomer(routed, "10.00", ALL_MODELS);
  slowJobId = await createJob(routed, slowCustomer.apiKey, {
    model: SCENARIO.slow, prompt: "a picture no route will ever finish", aspect_ratio: "1:1", resolution: "1K", timeout: 30,
  });
  await slowA.waitFor((all) => all.find((r) => r.respondedAt !== undefined), { timeoutMs: 15_000, what: "the first slow route to stall" });
  collectGarbage();
});
after(async () => {
  await routed?.close();
  await routesFile?.remove();
  await routedImages?.close();
  await Promise.all([stubA, stubB, slowA, slowB].map((stub) => stub?.close()));
});

// ---------------------------------------------------------------------------------------------
// One upstream: VENDOR_BASE_URL + VENDOR_API_KEY

describe("one upstream (VENDOR_BASE_URL): every model through every surface", () => {
  let stub: VendorStub;
  let service: TestService;
  let images: LocalServer;
  before(async () => {
    stub = await startVendorStub();
    images = await startImageServer();
    service = await startTestService({ VENDOR_BASE_URL: stub.url, VENDOR_API_KEY: stub.apiKey, UPSTREAM_POLL_INTERVAL: "50ms" });
  });
  after(async () => {
    await service?.close();
    await images?.close();
    await stub?.close();
  });

  describe("image jobs", () => {
    const cases = [
      // The fast model ignores resolution: no imageSize goes upstream, and the stub's default is 1K.
      { model: "aimodel-2.5-flash-image", aspect: "16:9", resolution: "2K", sent: { aspectRatio: "16:9" }, size: { width: 1024, height: 576 }, price: "0.039" },
      { model: FLASH_IMAGE, aspect: "16:9", resolution: "2K", sent: { aspectRatio: "16:9", imageSize: "2K" }, size: { width: 2048, height: 1152 }, price: "0.101" },
      { model: "aimodel-3-pro-image", aspect: "3:4", resolution: "1K", sent: { aspectRatio: "3:4", imageSize: "1K" }, size: { width: 768, height: 1024 }, price: "0.134" },
      { model: LITE_IMAGE, aspect: "1:1", resolution: "1K", sent: { aspectRatio: "1:1", imageSize: "1K" }, size: { width: 1024, height: 1024 }, price: "0.02" },
      { model: "aimodel-nbx-2.1", aspect: "1:4", resolution: "2K", sent: { aspectRatio: "1:4", imageSize: "2K" }, size: { width: 512, height: 2048 }, price: "0.08" },
    ];
    for (const c of cases) {
      it(`${c.model} ${c.aspect} ${c.resolution}: the upstream's PNG (${c.size.width}x${c.size.height}) and caption are the result, charged ${c.price}`, async () => {
        const customer = await createCustomer(service, "10.00", ALL_MODELS);
        const prompt = `a lighthouse at dawn, drawn by ${c.model}`;
        const mark = stub.requests.length;
        const job = await runJob(service, customer.apiKey, { model: c.model, prompt, aspect_ratio: c.aspect, resolution: c.resolution });
        assert.equal(job.status, "done", JSON.stringify(job));
        assert.equal(job.result.mime_type, "image/png");
        assert.equal(job.result.text, stubImageCaption(prompt));
        const file = await download(job.result.image_url);
        assert.equal(file.status, 200);
        assert.equal(file.contentType, "image/png");
        assert.deepEqual(probePng(file.bytes), c.size);

        const upstream = onlyRequest(stub, mark, { model: c.model, kind: "generate" });
        assert.equal(upstream.headers[VENDOR_KEY_HEADER], stub.apiKey);
        assert.deepEqual(userParts(upstream.body), [{ text: prompt }]);
        assert.deepEqual((upstream.body as any).generationConfig.imageConfig, c.sent);
        assert.equal(pico(job.usage.charged), pico(c.price));
        assert.equal(await settledCharge(service, customer.apiKey), pico(c.price));
      });
    }

    it("delivers the final image of a thinking model, not its thought draft", async () => {
      const customer = await createCustomer(service);
      const prompt = "a fox in the snow, thought through";
      const mark = stub.requests.length;
      const job = await runJob(service, customer.apiKey, { model: "aimodel-3-pro-image", prompt, aspect_ratio: "16:9", resolution: "1K" });
      assert.equal(job.status, "done", JSON.stringify(job));
      const upstream = onlyRequest(stub, mark, { kind: "generate" });
      const parts = (upstream.sent[0] as any).candidates[0].content.parts as { thought?: boolean; inlineData?: { data: string } }[];
      const draft = parts.find((p) => p.thought && p.inlineData);
      assert.ok(draft, "the stub sent a thought draft first");
      assert.deepEqual(probePng(Buffer.from(draft.inlineData!.data, "base64")), { width: 256, height: 144 });
      const file = await download(job.result.image_url);
      assert.deepEqual(probePng(file.bytes), { width: 1024, height: 576 });
      const final = parts.filter((p) => !p.thought && p.inlineData).at(-1)!;
      assert.deepEqual(Buffer.from(file.bytes), Buffer.from(final.inlineData!.data, "base64"));
    });

    it("sends no aspectRatio for auto, and the input images (URL and base64) inline after the prompt", async () => {
      const customer = await createCustomer(service);
      const prompt = "make this tile seamless";
      const served = tinyPng(8, 8);
      const inline = tinyPng(12, 6);
      const mark = stub.requests.length;
      const job = await runJob(service, customer.apiKey, {
        model: FLASH_IMAGE, prompt, aspect_ratio: "auto", resolution: "1K",
        input_images_urls: [`${images.url}/tile.png`],
        input_images_base64: [`data:image/png;base64,${inline.toString("base64")}`],
      });
      assert.equal(job.status, "done", JSON.stringify(job));
      const upstream = onlyRequest(stub, mark, { model: FLASH_IMAGE, kind: "generate" });
      const imageConfig = (upstream.body as any).generationConfig.imageConfig;
      assert.deepEqual(imageConfig, { imageSize: "1K" });
      assert.equal("aspectRatio" in imageConfig, false);
      const parts = userParts(upstream.body);
      assert.deepEqual(parts[0], { text: prompt });
      const sentImages = parts.slice(1).map((p) => p.inlineData);
      assert.equal(sentImages.length, 2, JSON.stringify(parts).slice(0, 500));
      assert.ok(sentImages.every((image) => image?.mimeType === "image/png"));
      assert.deepEqual(sentImages.map((image) => image!.data).sort(), [served.toString("base64"), inline.toString("base64")].sort());
      // Without a ratio the stub answers square, which the delivered file shows.
      assert.deepEqual(probePng((await download(job.result.image_url)).bytes), { width: 1024, height: 1024 });
      assert.equal(await settledCharge(service, customer.apiKey), pico("0.067"));
    });

    it("serves the deprecated nb2 url-generations alias from the upstream, with the fetched input image inline", async () => {
      const customer = await createCustomer(service);
      const prompt = "recolour this tile in blue";
      const mark = stub.requests.length;
      const created = await call(service, "POST", "/api/v1/nb2/url-generations", {
        key: customer.apiKey,
        body: { prompt, aspect_ratio: "1:1", resolution: "1K", input_images_urls: [`${images.url}/tile.png`] },
      });
      assert.equal(created.status, 202, created.text);
      const job = await finishedJob(service, customer.apiKey, created.json.job_id);
      assert.equal(job.status, "done", JSON.stringify(job));
      assert.equal(job.model, FLASH_IMAGE);
      const parts = userParts(onlyRequest(stub, mark, { model: FLASH_IMAGE, kind: "generate" }).body);
      assert.deepEqual(parts, [{ text: prompt }, { inlineData: { mimeType: "image/png", data: INPUT_PNG_B64 } }]);
      assert.equal(await settledCharge(service, customer.apiKey), pico("0.067"));
    });

    it("answers image_url null and the text when the upstream's image model answers text only", async () => {
      const customer = await createCustomer(service);
      const prompt = "describe a harbour instead of drawing it";
      stub.fault({ kind: "text-only" }, { model: FLASH_IMAGE, times: 1 });
      const job = await runJob(service, customer.apiKey, { model: FLASH_IMAGE, prompt, aspect_ratio: "1:1", resolution: "1K" });
      assert.equal(job.status, "done", JSON.stringify(job));
      assert.equal(job.result.image_url, null);
      assert.equal(job.result.text, stubImageCaption(prompt));
      const after = await balanceOf(service, customer.apiKey);
      assert.equal(after.reserved, "0.00");
      assert.ok(pico(after.balance) >= pico("10.00") - pico("0.067"), `charged at most the image price; balance ${after.balance}`);
    });
  });

  describe("text and multimodal jobs", () => {
    for (const model of [...TEXT_MODELS, OMNI]) {
      it(`${model}: result.text is the upstream's answer, usage its usageMetadata, charged usage × price`, async () => {
        const customer = await createCustomer(service);
        const prompt = `Write two lines about the sea for ${model}`;
        const mark = stub.requests.length;
        const job = await runJob(service, customer.apiKey, { model, prompt, aspect_ratio: "auto", resolution: "1K" });
        assert.equal(job.status, "done", JSON.stringify(job));
        assert.equal(job.result.text, stubAnswer(prompt));
        assert.equal(job.result.image_url, null);

        const upstream = onlyRequest(stub, mark, { model });
        assert.equal(upstream.headers[VENDOR_KEY_HEADER], stub.apiKey);
        assert.deepEqual(userParts(upstream.body), [{ text: prompt }]);
        const maxOutput = (upstream.body as any).generationConfig?.maxOutputTokens;
        assert.ok(Number.isInteger(maxOutput) && maxOutput > 0 && maxOutput <= 8192, `the upstream is held to the reserved bound (got ${maxOutput})`);

        const usage = upstream.lastUsage!;
        assert.equal(job.usage.prompt_token_count, usage.promptTokenCount);
        // Thinking is output (docs/api.md, "The vendor's API as the upstream"): the job has no separate field for it, so it counts with the candidates.
        assert.equal(job.usage.candidates_token_count, (usage.candidatesTokenCount ?? 0) + (usage.thoughtsTokenCount ?? 0));
        assert.equal(job.usage.total_token_count, usage.totalTokenCount);
        const expected = chargeFor(TEXT_PRICES[model]!, usage);
        assert.equal(pico(job.usage.charged), expected);
        assert.equal(await settledCharge(service, customer.apiKey), expected);
      });
    }

    it("bills a thinking model's thoughtsTokenCount as output: prompt × 2.00 + (candidates + 200) × 12.00", async () => {
      const customer = await createCustomer(service);
      const prompt = "Prove that there are infinitely many primes";
      const mark = stub.requests.length;
      const job = await runJob(service, customer.apiKey, { model: PRO_TEXT, prompt });
      assert.equal(job.status, "done", JSON.stringify(job));
      const usage = onlyRequest(stub, mark, { model: PRO_TEXT }).lastUsage!;
      assert.equal(usage.thoughtsTokenCount, THOUGHTS_TOKENS);
      const expected = perMillion("2.00", stubTokens(prompt)) + perMillion("12.00", stubTokens(stubAnswer(prompt)) + THOUGHTS_TOKENS);
      assert.equal(pico(job.usage.charged), expected);
      assert.equal(await settledCharge(service, customer.apiKey), expected);
    });

    it("bills the omni model prompt × 0.50 + TEXT × 2.00 + VIDEO × 12.00 per 1M from the upstream's modality split", async () => {
      const customer = await createCustomer(service);
      const prompt = "Narrate a short clip of a cyclist on a bridge";
      const mark = stub.requests.length;
      const job = await runJob(service, customer.apiKey, { model: OMNI, prompt });
      assert.equal(job.status, "done", JSON.stringify(job));
      const usage = onlyRequest(stub, mark, { model: OMNI }).lastUsage!;
      assert.equal(videoTokensOf(usage), OMNI_VIDEO_TOKENS);
      assert.equal(textTokensOf(usage), stubTokens(stubAnswer(prompt)));
      const expected =
        perMillion("0.50", stubTokens(prompt)) + perMillion("2.00", stubTokens(stubAnswer(prompt))) + perMillion("12.00", OMNI_VIDEO_TOKENS);
      assert.equal(pico(job.usage.charged), expected);
      assert.equal(await settledCharge(service, customer.apiKey), expected);
    });
  });

  describe("synchronous text API", () => {
    it("generateContent passes the caller's request upstream with the route's key and answers the upstream's text and usage", async () => {
      const customer = await createCustomer(service);
      const prompt = "What is in this picture?";
      const body = {
        systemInstruction: { parts: [{ text: "Answer in one sentence." }] },
        contents: [{ role: "user", parts: [{ text: prompt }, { inlineData: { mimeType: "image/png", data: INPUT_PNG_B64 } }] }],
        generationConfig: { temperature: 0.5 },
      };
      const mark = stub.requests.length;
      const response = await generateContent(service, FLASH, customer.apiKey, body);
      assert.equal(response.status, 200, response.text);

      const upstream = onlyRequest(stub, mark, { model: FLASH });
      // The caller's key stays with the service; the upstream sees the route's.
      assert.equal(upstream.headers[VENDOR_KEY_HEADER], stub.apiKey);
      const sent = upstream.body as any;
      assert.deepEqual(sent.contents, body.contents);
      assert.deepEqual(sent.systemInstruction.parts, body.systemInstruction.parts);
      assert.equal(sent.generationConfig.temperature, 0.5);

      const candidate = response.json.candidates[0];
      assert.equal(answerText(response.json), stubAnswer(prompt));
      assert.equal(candidate.content.role, "model");
      assert.equal(candidate.finishReason, "STOP");
      const usage = upstream.lastUsage!;
      assert.deepEqual(
        { prompt: response.json.usageMetadata.promptTokenCount, candidates: response.json.usageMetadata.candidatesTokenCount, total: response.json.usageMetadata.totalTokenCount },
        { prompt: usage.promptTokenCount, candidates: usage.candidatesTokenCount, total: usage.totalTokenCount },
      );
      assert.equal(await settledCharge(service, customer.apiKey), chargeFor(TEXT_PRICES[FLASH]!, usage));
    });

    it("streamGenerateContent passes the upstream's chunks through: same text, cumulative usage, finishReason on the last", async () => {
      const customer = await createCustomer(service);
      const prompt = longPrompt("a fishing village");
      const mark = stub.requests.length;
      const response = await streamRequest(service, FLASH, userTurn(prompt), { key: customer.apiKey });
      assert.equal(response.status, 200);
      assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
      const events = sseEvents(await response.text());

      const upstream = onlyRequest(stub, mark, { model: FLASH, kind: "stream" });
      assert.equal(upstream.query.alt, "sse");
      const chunks = upstream.sent as { usageMetadata: UsageMetadata; candidates: { finishReason?: string }[] }[];
      assert.equal(chunks.length, stubTextChunks(stubAnswer(prompt)).length);
      assert.ok(chunks.length >= 3);
      assert.equal(events.length, chunks.length, `one event per upstream chunk; got ${events.length} for ${chunks.length}`);
      events.forEach((event, i) => {
        const theirs = chunks[i]!.usageMetadata;
        assert.equal(answerText(event), answerText(chunks[i]), `text of chunk ${i}`);
        assert.deepEqual(
          [event.usageMetadata.promptTokenCount, event.usageMetadata.candidatesTokenCount, event.usageMetadata.totalTokenCount],
          [theirs.promptTokenCount, theirs.candidatesTokenCount, theirs.totalTokenCount],
          `usage of chunk ${i}`,
        );
        if (i < events.length - 1) assert.ok(!event.candidates[0].finishReason, `no finishReason before the last chunk (chunk ${i})`);
      });
      assert.equal(events.map(answerText).join(""), stubAnswer(prompt));
      assert.equal(events.at(-1).candidates[0].finishReason, "STOP");
      assert.equal(await settledCharge(service, customer.apiKey), chargeFor(TEXT_PRICES[FLASH]!, upstream.lastUsage!));
    });

    it("charges a thinking model's answer prompt × 2.00 + (candidates + thoughts) × 12.00", async () => {
      const customer = await createCustomer(service);
      const prompt = "Why is the sky blue?";
      const mark = stub.requests.length;
      const response = await generateContent(service, PRO_TEXT, customer.apiKey, userTurn(prompt));
      assert.equal(response.status, 200, response.text);
      assert.equal(answerText(response.json), stubAnswer(prompt));
      const usage = onlyRequest(stub, mark, { model: PRO_TEXT }).lastUsage!;
      assert.equal(usage.thoughtsTokenCount, THOUGHTS_TOKENS);
      assert.equal(response.json.usageMetadata.promptTokenCount, usage.promptTokenCount);
      assert.equal(response.json.usageMetadata.totalTokenCount, usage.totalTokenCount);
      const expected = perMillion("2.00", stubTokens(prompt)) + perMillion("12.00", stubTokens(stubAnswer(prompt)) + THOUGHTS_TOKENS);
      assert.equal(await settledCharge(service, customer.apiKey), expected);
    });

    it("streams the omni model with its VIDEO usage and charges TEXT × 2.00 + VIDEO × 12.00 exactly", async () => {
      const customer = await createCustomer(service);
      const prompt = longPrompt("a bridge at night");
      const mark = stub.requests.length;
      const response = await streamRequest(service, OMNI, userTurn(prompt), { key: customer.apiKey });
      assert.equal(response.status, 200);
      const events = sseEvents(await response.text());
      assert.equal(events.map(answerText).join(""), stubAnswer(prompt));
      const usage = onlyRequest(stub, mark, { model: OMNI }).lastUsage!;
      const last = events.at(-1).usageMetadata;
      assert.equal(last.candidatesTokenCount, usage.candidatesTokenCount);
      const lastVideo = (last.candidatesTokensDetails ?? []).find((d: { modality: string }) => d.modality === "VIDEO");
      assert.equal(lastVideo?.tokenCount, OMNI_VIDEO_TOKENS);
      const expected =
        perMillion("0.50", usage.promptTokenCount) + perMillion("2.00", textTokensOf(usage)) + perMillion("12.00", OMNI_VIDEO_TOKENS);
      assert.equal(expected, chargeFor(TEXT_PRICES[OMNI]!, usage));
      assert.equal(await settledCharge(service, customer.apiKey), expected);
    });
  });

  describe("video", () => {
    it("a video job starts the upstream operation, polls it, downloads the MP4 with the key and charges 0.40 × 4", async () => {
      const customer = await createCustomer(service);
      const prompt = "waves on a pebble beach, portrait";
      const mark = stub.requests.length;
      const job = await runJob(service, customer.apiKey, { model: VIDEO, prompt, aspect_ratio: "9:16", resolution: "720p", duration_seconds: 4 });
      assert.equal(job.status, "done", JSON.stringify(job));
      assert.equal(job.result.mime_type, "video/mp4");
      const file = await download(job.result.image_url);
      assert.equal(file.status, 200);
      assert.equal(file.contentType, "video/mp4");
      const probe = await probeMp4(file.bytes);
      assert.deepEqual({ width: probe.width, height: probe.height }, { width: 720, height: 1280 });
      assert.ok(Math.abs(probe.durationSeconds - 4) < 0.05, `duration ${probe.durationSeconds}`);

      const seen = stub.requests.slice(mark);
      const kinds = seen.map((r) => r.kind);
      assert.equal(kinds[0], "predict", seenBy(stub, mark));
      assert.equal(kinds.at(-1), "download", seenBy(stub, mark));
      assert.ok(kinds.filter((k) => k === "poll").length >= 2, `polled until done (the stub answers pending once): ${seenBy(stub, mark)}`);
      assert.ok(seen.every((r) => r.headers[VENDOR_KEY_HEADER] === stub.apiKey), "every upstream call carries the key");
      const predict = seen[0]!.body as any;
      assert.equal(predict.instances[0].prompt, prompt);
      assert.equal(predict.parameters.durationSeconds, 4);
      assert.equal(predict.parameters.aspectRatio, "9:16");
      assert.equal(seen.at(-1)!.status, 200);
      const expected = pico(VIDEO_PER_SECOND_720P) * 4n;
      assert.equal(pico(job.usage.charged), expected);
      assert.equal(await settledCharge(service, customer.apiKey), expected);
    });

    it("the interactions endpoint makes the video upstream with its durationSeconds, charged 0.40 × 2", async () => {
      const customer = await createCustomer(service);
      const prompt = "a kite over the dunes";
      const mark = stub.requests.length;
      const created = await call(service, "POST", `${VENDOR}/interactions`, {
        vendorKey: customer.apiKey,
        body: { model: VIDEO, instances: [{ prompt }], parameters: { durationSeconds: 2 } },
      });
      assert.equal(created.status, 202, created.text);
      const job = await finishedJob(service, customer.apiKey, created.json.job_id);
      assert.equal(job.status, "done", JSON.stringify(job));
      const probe = await probeMp4((await download(job.result.image_url)).bytes);
      assert.deepEqual({ width: probe.width, height: probe.height }, { width: 1280, height: 720 });
      assert.ok(Math.abs(probe.durationSeconds - 2) < 0.05, `duration ${probe.durationSeconds}`);
      const predict = onlyRequest(stub, mark, { kind: "predict" });
      assert.equal((predict.body as any).instances[0].prompt, prompt);
      assert.equal((predict.body as any).parameters.durationSeconds, 2);
      assert.equal(requestsSince(stub, mark, { kind: "download" }).length, 1);
      assert.ok(requestsSince(stub, mark).every((r) => r.headers[VENDOR_KEY_HEADER] === stub.apiKey));
      assert.equal(await settledCharge(service, customer.apiKey), pico(VIDEO_PER_SECOND_720P) * 2n);
    });

    it("fails a video the upstream filtered with output_blocked and charges nothing", async () => {
      const customer = await createCustomer(service);
      stub.fault({ kind: "video-filtered" }, { model: VIDEO, on: "predict", times: 1 });
      const job = await runJob(service, customer.apiKey, { model: VIDEO, prompt: "something the filter refuses", resolution: "720p", duration_seconds: 4 });
      assert.equal(job.status, "failed", JSON.stringify(job));
      assert.equal(job.error, "output_blocked");
      assert.equal(job.result, null);
      assert.equal(await settledCharge(service, customer.apiKey), 0n);
    });

    it("fails a video whose upstream operation ended in error and charges nothing", async () => {
      const customer = await createCustomer(service);
      stub.fault({ kind: "operation-error" }, { model: VIDEO, on: "predict", times: 1 });
      const job = await runJob(service, customer.apiKey, { model: VIDEO, prompt: "a video that breaks", resolution: "720p", duration_seconds: 4 });
      assert.equal(job.status, "failed", JSON.stringify(job));
      assert.equal(typeof job.error, "string");
      assert.equal(await settledCharge(service, customer.apiKey), 0n);
    });
  });

  describe("refusals by the upstream", () => {
    it("fails an image job whose prompt the upstream blocked with prompt_blocked and charges nothing", async () => {
      const customer = await createCustomer(service);
      stub.fault({ kind: "blocked" }, { model: FLASH_IMAGE, times: 1 });
      const job = await runJob(service, customer.apiKey, { model: FLASH_IMAGE, prompt: "a forbidden picture", aspect_ratio: "1:1", resolution: "1K" });
      assert.equal(job.status, "failed", JSON.stringify(job));
      assert.equal(job.error, "prompt_blocked");
      assert.equal(job.result, null);
      assert.equal(await settledCharge(service, customer.apiKey), 0n);
    });

    it("fails an image job whose output the upstream withheld (IMAGE_SAFETY, no content) with output_blocked and charges nothing", async () => {
      const customer = await createCustomer(service);
      stub.fault({ kind: "safety-finish" }, { model: FLASH_IMAGE, times: 1 });
      const job = await runJob(service, customer.apiKey, { model: FLASH_IMAGE, prompt: "a picture the filter withholds", aspect_ratio: "1:1", resolution: "1K" });
      assert.equal(job.status, "failed", JSON.stringify(job));
      assert.equal(job.error, "output_blocked");
      assert.equal(await settledCharge(service, customer.apiKey), 0n);
    });

    it("fails a text job whose prompt was blocked with prompt_blocked, and one finished by SAFETY with output_blocked, charging nothing", async () => {
      const customer = await createCustomer(service);
      stub.fault({ kind: "blocked" }, { model: FLASH, times: 1 });
      const blocked = await runJob(service, customer.apiKey, { model: FLASH, prompt: "a forbidden question" });
      assert.equal(blocked.status, "failed", JSON.stringify(blocked));
      assert.equal(blocked.error, "prompt_blocked");
      stub.fault({ kind: "safety-finish", finishReason: "SAFETY" }, { model: FLASH, times: 1 });
      const withheld = await runJob(service, customer.apiKey, { model: FLASH, prompt: "a question whose answer is withheld" });
      assert.equal(withheld.status, "failed", JSON.stringify(withheld));
      assert.equal(withheld.error, "output_blocked");
      assert.equal(await settledCharge(service, customer.apiKey), 0n);
    });

    it("answers a blocked prompt on generateContent with 200 and promptFeedback, and charges nothing", async () => {
      const customer = await createCustomer(service);
      stub.fault({ kind: "blocked" }, { model: FLASH, times: 1 });
      const response = await generateContent(service, FLASH, customer.apiKey, userTurn("a forbidden question"));
      assert.equal(response.status, 200, response.text);
      assert.equal(response.json.promptFeedback?.blockReason, "SAFETY");
      assert.equal((response.json.candidates ?? []).length, 0);
      assert.equal(await settledCharge(service, customer.apiKey), 0n);
    });

    it("answers a blocked prompt on the stream with 200 and one promptFeedback event, and charges nothing", async () => {
      const customer = await createCustomer(service);
      stub.fault({ kind: "blocked" }, { model: FLASH, times: 1 });
      const response = await streamRequest(service, FLASH, userTurn("a forbidden question"), { key: customer.apiKey });
      assert.equal(response.status, 200);
      const events = sseEvents(await response.text());
      assert.equal(events.length, 1, JSON.stringify(events));
      assert.equal(events[0].promptFeedback?.blockReason, "SAFETY");
      assert.equal(await settledCharge(service, customer.apiKey), 0n);
    });

    it("passes on a safety finish without content on generateContent uncharged (docs/api.md: the blocked answer is passed on, uncharged)", async () => {
      const customer = await createCustomer(service);
      stub.fault({ kind: "safety-finish", finishReason: "SAFETY" }, { model: FLASH, times: 1 });
      const response = await generateContent(service, FLASH, customer.apiKey, userTurn("a question whose answer is withheld"));
      assert.equal(response.status, 200, response.text);
      assert.equal(response.json.candidates?.[0]?.finishReason, "SAFETY");
      assert.equal(answerText(response.json), "");
      assert.equal(await settledCharge(service, customer.apiKey), 0n);
    });
  });

  describe("aborted streams", () => {
    it("aborting after the first chunk closes the upstream request at once and charges that chunk's cumulative usage", async () => {
      const customer = await createCustomer(service);
      const prompt = longPrompt("a lighthouse keeper");
      const chunksInFull = stubTextChunks(stubAnswer(prompt)).length;
      stub.chunkIntervalMs = 3_000;
      try {
        const mark = stub.requests.length;
        const controller = new AbortController();
        const response = await streamRequest(service, FLASH, userTurn(prompt), { key: customer.apiKey, signal: controller.signal });
        assert.equal(response.status, 200);
        const { event } = await firstEvent(response);
        const abortedAt = Date.now();
        controller.abort();

        const upstream = onlyRequest(stub, mark, { model: FLASH, kind: "stream" });
        const closed = await stub.waitForClientClose(upstream.index, { timeoutMs: 2_500 });
        assert.ok(closed.closedAt! - abortedAt < 1_000, `the upstream request closed ${closed.closedAt! - abortedAt} ms after the client left`);
        assert.ok(closed.chunksSent >= 1 && closed.chunksSent < chunksInFull, `${closed.chunksSent} of ${chunksInFull} chunks were produced`);
        assert.equal(answerText(event), answerText(closed.sent[0]));

        const charge = await settledCharge(service, customer.apiKey);
        assert.equal(charge, chargeFor(TEXT_PRICES[FLASH]!, closed.lastUsage!));
        const full = perMillion("0.30", stubTokens(prompt)) + perMillion("2.50", stubTokens(stubAnswer(prompt)));
        assert.ok(charge < full, `charged ${charge} for a part of an answer that costs ${full} in full`);
      } finally {
        stub.chunkIntervalMs = 0;
      }
    });

    it("aborting before the first chunk closes the upstream request and charges nothing", async () => {
      const customer = await createCustomer(service);
      const mark = stub.requests.length;
      const slow = stub.delay(10_000, { model: FLASH, on: "stream", times: 1 });
      try {
        const controller = new AbortController();
        const pending = streamRequest(service, FLASH, userTurn("a question answered too late"), { key: customer.apiKey, signal: controller.signal })
          .then((response) => response.text())
          .catch((error: Error) => error);
        const upstream = await stub.waitFor((all) => all.slice(mark).find((r) => r.kind === "stream" && r.model === FLASH), {
          what: "the stream request to reach the upstream",
        });
        controller.abort();
        await pending;
        const closed = await stub.waitForClientClose(upstream.index, { timeoutMs: 2_500 });
        assert.equal(closed.chunksSent, 0);
        assert.equal(await settledCharge(service, customer.apiKey), 0n);
        assert.equal((await balanceOf(service, customer.apiKey)).balance, "10.00");
      } finally {
        slow.remove();
      }
    });
  });

  it("serves a job created over gRPC, and a gRPC generateContent with x-vendor-api-key metadata, from the upstream", async () => {
    const customer = await createCustomer(service);
    const pkg = loadGrpcPackage();
    const address = grpcAddress(service.grpcUrl);
    const generation = new pkg.GenerationService!(address, grpc.credentials.createInsecure());
    const text = new pkg.TextService!(address, grpc.credentials.createInsecure());
    try {
      const prompt = "a windmill over tulip fields, by gRPC";
      const mark = stub.requests.length;
      const created = await unary(generation, "CreateGeneration", { model: FLASH_IMAGE, prompt, aspectRatio: "4:3", resolution: "1K" }, bearer(customer.apiKey));
      const { job } = await eventually(
        () => unary(generation, "GetJob", { jobId: created.jobId }, bearer(customer.apiKey)),
        (r: any) => r.job.status === "JOB_STATUS_DONE" || r.job.status === "JOB_STATUS_FAILED",
        { what: "the gRPC job to finish" },
      );
      assert.equal(job.status, "JOB_STATUS_DONE", JSON.stringify(job));
      assert.equal(job.result.text, stubImageCaption(prompt));
      assert.deepEqual(probePng((await download(job.result.imageUrl)).bytes), { width: 1024, height: 768 });
      const upstream = onlyRequest(stub, mark, { model: FLASH_IMAGE, kind: "generate" });
      assert.deepEqual((upstream.body as any).generationConfig.imageConfig, { aspectRatio: "4:3", imageSize: "1K" });

      const question = "What is a windmill for?";
      const metadata = new grpc.Metadata();
      metadata.set("x-vendor-api-key", customer.apiKey);
      const answer = await unary(text, "GenerateContent", { model: FLASH, contents: [{ role: "user", parts: [{ text: question }] }] }, metadata);
      assert.equal(answer.candidates[0].content.parts.map((p: { text?: string }) => p.text ?? "").join(""), stubAnswer(question));
      const usage = onlyRequest(stub, mark, { model: FLASH }).lastUsage!;
      assert.equal(answer.usageMetadata.totalTokenCount, usage.totalTokenCount);
      assert.equal(await settledCharge(service, customer.apiKey), pico("0.067") + chargeFor(TEXT_PRICES[FLASH]!, usage));
    } finally {
      generation.close();
      text.close();
    }
  });
});

describe("a route table (ROUTES_FILE)", () => {
  const imageJob = (model: string, prompt: string) => ({ model, prompt, aspect_ratio: "1:1", resolution: "1K" });

  describe("failover", () => {
    it("fails over from a route answering 503 to the next one, and admin shows the failure and the success", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.f503;
      const [markA, markB] = [stubA.requests.length, stubB.requests.length];
      const before = await routesByName(routed);
      stubA.fault({ kind: "status", status: 503 }, { model, times: 1 });
      const prompt = "a harbour at noon";
      const job = await runJob(routed, customer.apiKey, imageJob(model, prompt));
      assert.equal(job.status, "done", JSON.stringify(job));
      assert.equal(job.result.text, stubImageCaption(prompt));
      assert.deepEqual(probePng((await download(job.result.image_url)).bytes), { width: 1024, height: 1024 });

      const first = onlyRequest(stubA, markA, { model });
      assert.equal(first.status, 503);
      assert.equal(first.headers[VENDOR_KEY_HEADER], "route-a-key");
      const second = onlyRequest(stubB, markB, { model });
      assert.equal(second.status, 200);
      assert.equal(second.headers[VENDOR_KEY_HEADER], "route-b-key");
      assert.equal(await settledCharge(routed, customer.apiKey), pico("0.067"));

      const now = await routesByName(routed);
      const [a0, a1, b0, b1] = [before.get("f503-a"), now.get("f503-a"), before.get("f503-b"), now.get("f503-b")];
      assert.ok(a1 && b1, `both routes are listed: ${[...now.keys()].join(", ")}`);
      assert.equal(Number(a1.failures), Number(a0.failures) + 1);
      assert.ok(a1.consecutive_failures >= 1);
      assert.match(a1.last_error, /503/);
      assert.ok(a1.last_error_at, "last_error_at is set");
      assert.equal(a1.paused, false);
      assert.equal(Number(b1.requests), Number(b0.requests) + 1);
      assert.equal(Number(b1.failures), Number(b0.failures));
      assert.ok(b1.last_success_at, "last_success_at is set");
      assert.equal(b1.healthy, true);
    });

    it("when a route answers 503 and the job fails over, then /metrics counts the failed call, the failover, the serving route's call and tokens", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.f503;
      const scrape = async () => parseExposition((await call(routed, "GET", "/metrics")).text);
      const before = await scrape();
      stubA.fault({ kind: "status", status: 503 }, { model, times: 1 });
      const job = await runJob(routed, customer.apiKey, imageJob(model, "a harbour at dusk"));
      assert.equal(job.status, "done", JSON.stringify(job));
      const after = await scrape();
      const delta = (name: string, labels: Record<string, string>) => valueOf(after, name, labels) - valueOf(before, name, labels);
      assert.equal(delta("upstream_requests_total", { route: "f503-a", operation: "image", outcome: "error" }), 1);
      assert.equal(delta("upstream_requests_total", { route: "f503-b", operation: "image", outcome: "ok" }), 1);
      assert.equal(delta("upstream_failovers_total", { from: "f503-a", to: "f503-b" }), 1);
      assert.ok(delta("upstream_tokens_total", { route: "f503-b", direction: "input" }) > 0);
      assert.equal(delta("upstream_request_duration_seconds_count", { route: "f503-b", operation: "image" }), 1);
      assert.equal(valueOf(after, "upstream_route_healthy", { route: "f503-b" }), 1);
    });

    it("fails over from a route answering 429 (text job) and charges the usage the serving route reported", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.f429;
      const [markA, markB] = [stubA.requests.length, stubB.requests.length];
      stubA.fault({ kind: "status", status: 429 }, { model, times: 1 });
      const prompt = "Summarise the tides in one line";
      const job = await runJob(routed, customer.apiKey, { model, prompt });
      assert.equal(job.status, "done", JSON.stringify(job));
      assert.equal(job.result.text, stubAnswer(prompt));
      assert.equal(onlyRequest(stubA, markA, { model }).status, 429);
      const served = onlyRequest(stubB, markB, { model });
      assert.equal(await settledCharge(routed, customer.apiKey), chargeFor(TEXT_PRICES[model]!, served.lastUsage!));
    });

    it("fails over from a route whose port refuses connections, and admin records the error", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.refused;
      const markB = stubB.requests.length;
      const before = (await routesByName(routed)).get("refused-a");
      const job = await runJob(routed, customer.apiKey, imageJob(model, "a pier in fog"));
      assert.equal(job.status, "done", JSON.stringify(job));
      assert.equal(onlyRequest(stubB, markB, { model }).status, 200);
      const after = (await routesByName(routed)).get("refused-a");
      assert.equal(Number(after.failures), Number(before.failures) + 1);
      assert.ok(after.last_error.length > 0);
      assert.equal(await settledCharge(routed, customer.apiKey), pico("0.039"));
    });

    it("fails over from a route answering a malformed body, charging only the serving route's usage", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.malformed;
      const [markA, markB] = [stubA.requests.length, stubB.requests.length];
      stubA.fault({ kind: "malformed" }, { model, times: 1 });
      const prompt = "Name three kinds of gull";
      const job = await runJob(routed, customer.apiKey, { model, prompt });
      assert.equal(job.status, "done", JSON.stringify(job));
      assert.equal(job.result.text, stubAnswer(prompt));
      assert.equal(onlyRequest(stubA, markA, { model }).fault?.kind, "malformed");
      const served = onlyRequest(stubB, markB, { model });
      assert.equal(await settledCharge(routed, customer.apiKey), chargeFor(TEXT_PRICES[model]!, served.lastUsage!));
    });

    it("gives up on a stalled route after its timeout_ms, closes that request and finishes on the next route", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.stall;
      const [markA, markB] = [stubA.requests.length, stubB.requests.length];
      stubA.fault({ kind: "stall" }, { model, times: 1 });
      const jobId = await createJob(routed, customer.apiKey, imageJob(model, "a lighthouse in a storm"));
      await stubA.waitFor((all) => all.slice(markA).find((r) => r.model === model && r.respondedAt !== undefined), {
        what: "the stalling route to send its headers",
      });
      // The route's timeout must hold however long the wait, including across a garbage collection.
      collectGarbage();
      const job = await finishedJob(routed, customer.apiKey, jobId, 10_000);
      assert.equal(job.status, "done", JSON.stringify(job));
      const stalled = onlyRequest(stubA, markA, { model });
      const closed = await stubA.waitForClientClose(stalled.index, { timeoutMs: 5_000 });
      const waited = closed.closedAt! - closed.receivedAt;
      assert.ok(waited >= STALL_TIMEOUT_MS - 250 && waited < STALL_TIMEOUT_MS + 5_000, `the stalled call was given up after ${waited} ms`);
      assert.equal(onlyRequest(stubB, markB, { model }).status, 200);
      assert.equal(await settledCharge(routed, customer.apiKey), pico("0.134"));
    });

    it("does not fail over on a 400 from the upstream: the job fails upstream_rejected and nothing is charged", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.f400;
      const [markA, markB] = [stubA.requests.length, stubB.requests.length];
      stubA.fault({ kind: "status", status: 400, message: "* GenerateContentRequest.contents: bad request" }, { model, times: 1 });
      const job = await runJob(routed, customer.apiKey, { model, prompt: "a request the upstream rejects" });
      assert.equal(job.status, "failed", JSON.stringify(job));
      assert.equal(job.error, "upstream_rejected");
      assert.equal(onlyRequest(stubA, markA, { model }).status, 400);
      assert.equal(requestsSince(stubB, markB, { model }).length, 0, `the second route got nothing: ${seenBy(stubB, markB)}`);
      assert.equal(await settledCharge(routed, customer.apiKey), 0n);
    });

    it("fails a sync stream over when the first route drops before its first chunk: the client gets the whole answer", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.sse;
      const [markA, markB] = [stubA.requests.length, stubB.requests.length];
      stubA.fault({ kind: "drop" }, { model, on: "stream", times: 1 });
      const prompt = longPrompt("the morning ferry");
      const response = await streamRequest(routed, model, userTurn(prompt), { key: customer.apiKey });
      assert.equal(response.status, 200);
      const events = sseEvents(await response.text());
      assert.ok(events.every((event) => !event.error), JSON.stringify(events.filter((event) => event.error)));
      assert.equal(events.map(answerText).join(""), stubAnswer(prompt));
      assert.equal(events.at(-1).candidates[0].finishReason, "STOP");
      assert.equal(onlyRequest(stubA, markA, { model }).closedByStub, true);
      const served = onlyRequest(stubB, markB, { model });
      assert.equal(events.length, served.chunksSent);
      assert.equal(await settledCharge(routed, customer.apiKey), chargeFor(TEXT_PRICES[model]!, served.lastUsage!));
    });

    it("when the first route drops a non-streamed call, then generateContent asks the next route once, unary, and answers and charges its whole answer", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.sse;
      const [markA, markB] = [stubA.requests.length, stubB.requests.length];
      stubA.fault({ kind: "drop" }, { model, on: "generate", times: 1 });
      const prompt = longPrompt("the harbour pilot");
      const response = await generateContent(routed, model, customer.apiKey, userTurn(prompt));
      assert.equal(response.status, 200, response.text);
      assert.equal(answerText(response.json), stubAnswer(prompt));
      assert.equal(onlyRequest(stubA, markA, { model }).kind, "generate");
      const served = onlyRequest(stubB, markB, { model });
      assert.equal(served.kind, "generate", "a non-streamed call is one unary upstream call, not a stream");
      assert.equal(response.json.usageMetadata.candidatesTokenCount, served.lastUsage!.candidatesTokenCount);
      assert.equal(await settledCharge(routed, customer.apiKey), chargeFor(TEXT_PRICES[model]!, served.lastUsage!));
    });

    it("fails a sync stream over when the first route's stream stays silent past its timeout_ms before the first chunk", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.sseStall;
      const [markA, markB] = [stubA.requests.length, stubB.requests.length];
      stubA.fault({ kind: "stall" }, { model, on: "stream", times: 1 });
      const prompt = longPrompt("the lock keeper");
      const started = Date.now();
      const response = await streamRequest(routed, model, userTurn(prompt), { key: customer.apiKey });
      assert.equal(response.status, 200);
      const events = sseEvents(await response.text());
      assert.equal(events.map(answerText).join(""), stubAnswer(prompt));
      assert.ok(Date.now() - started >= STALL_TIMEOUT_MS - 250, "the silent route was given its timeout_ms");
      const stalled = onlyRequest(stubA, markA, { model });
      await stubA.waitForClientClose(stalled.index, { timeoutMs: 5_000 });
      const served = onlyRequest(stubB, markB, { model });
      assert.equal(await settledCharge(routed, customer.apiKey), chargeFor(TEXT_PRICES[model]!, served.lastUsage!));
    });

    it("does not fail a sync stream over after chunks were streamed: the client gets them, then an error event; the second route gets nothing", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.drop;
      const [markA, markB] = [stubA.requests.length, stubB.requests.length];
      stubA.fault({ kind: "drop", afterChunks: 2 }, { model, on: "stream", times: 1 });
      const prompt = longPrompt("the evening ferry");
      const response = await streamRequest(routed, model, userTurn(prompt), { key: customer.apiKey });
      assert.equal(response.status, 200);
      const events = sseEvents(await response.text());
      const dropped = onlyRequest(stubA, markA, { model });
      assert.equal(dropped.chunksSent, 2);
      assert.equal(events.length, 3, JSON.stringify(events).slice(0, 1_000));
      assert.equal(answerText(events[0]), answerText(dropped.sent[0]));
      assert.equal(answerText(events[1]), answerText(dropped.sent[1]));
      assert.ok(events[2].error, `the last event is an error: ${JSON.stringify(events[2])}`);
      assert.equal(typeof events[2].error.message, "string");
      assert.equal(events[2].candidates, undefined);
      assert.equal(requestsSince(stubB, markB, { model }).length, 0, `the second route got nothing: ${seenBy(stubB, markB)}`);
      // What reached the client is owed: the upstream's cumulative usage after the chunks it sent.
      assert.equal(await settledCharge(routed, customer.apiKey), chargeFor(TEXT_PRICES[model]!, dropped.lastUsage!));
    });

    it("fails a text job whose stream drops after output began with upstream_interrupted, without failover, charging nothing", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.drop;
      const [markA, markB] = [stubA.requests.length, stubB.requests.length];
      stubA.fault({ kind: "drop", afterChunks: 2 }, { model, on: "stream", times: 1 });
      const job = await runJob(routed, customer.apiKey, { model, prompt: longPrompt("the night ferry") });
      assert.equal(job.status, "failed", JSON.stringify(job));
      assert.equal(job.error, "upstream_interrupted");
      assert.equal(onlyRequest(stubA, markA, { model }).chunksSent, 2);
      assert.equal(requestsSince(stubB, markB, { model }).length, 0, `the second route got nothing: ${seenBy(stubB, markB)}`);
      assert.equal(await settledCharge(routed, customer.apiKey), 0n);
    });
  });

  describe("pausing a route", () => {
    it("skips a paused route for jobs and sync calls, shows it paused in admin, and uses it again once resumed", async () => {
      const customer = await createCustomer(routed);
      const model = SCENARIO.paused;
      const paused = await call(routed, "PUT", "/admin/v1/routes/paused-a/pause", { admin: true, body: { paused: true } });
      assert.equal(paused.status, 200, paused.text);
      assert.deepEqual(paused.json, { name: "paused-a", paused: true });
      try {
        const listed = await routesByName(routed);
        assert.equal(listed.get("paused-a").paused, true);
        assert.equal(listed.get("paused-b").paused, false);

        const [markA, markB] = [stubA.requests.length, stubB.requests.length];
        const prompt = "Which way does the wind blow?";
        const job = await runJob(routed, customer.apiKey, { model, prompt });
        assert.equal(job.status, "done", JSON.stringify(job));
        assert.equal(job.result.text, stubAnswer(prompt));
        const sync = await generateContent(routed, model, customer.apiKey, userTurn(prompt));
        assert.equal(sync.status, 200, sync.text);
        assert.equal(answerText(sync.json), stubAnswer(prompt));
        assert.equal(requestsSince(stubA, markA, { model }).length, 0, `the paused route got nothing: ${seenBy(stubA, markA)}`);
        assert.equal(requestsSince(stubB, markB, { model }).length, 2);
      } finally {
        const resumed = await call(routed, "PUT", "/admin/v1/routes/paused-a/pause", { admin: true, body: { paused: false } });
        assert.equal(resumed.status, 200, resumed.text);
      }
      const markA = stubA.requests.length;
      const sync = await generateContent(routed, model, customer.apiKey, userTurn("And now?"));
      assert.equal(sync.status, 200, sync.text);
      assert.equal(requestsSince(stubA, markA, { model }).length, 1, "the resumed route serves again");
      assert.equal((await routesByName(routed)).get("paused-a").paused, false);
    });

    it("answers 404 route_not_found for pausing a route that is not in the table", async () => {
      const response = await call(routed, "PUT", "/admin/v1/routes/no-such-route/pause", { admin: true, body: { paused: true } });
      assertPlatformError(response, 404, "route_not_found");
    });
  });

  describe("per-route limits", () => {
    const urls = (n: number) => Array.from({ length: n }, (_, i) => `${routedImages.url}/input-${i}.png`);

    it("rejects 31 input images with 422 too_many_input_images when the active route allows 30, holding nothing", async () => {
      const customer = await createCustomer(routed);
      const response = await postGeneration(routed, customer.apiKey, {
        model: SCENARIO.small, prompt: "a collage", aspect_ratio: "1:1", resolution: "1K", input_images_urls: urls(31),
      });
      assertPlatformError(response, 422, "too_many_input_images");
      assert.deepEqual(await balanceOf(routed, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
    });

    it("accepts 30 input images on that route and sends all 30 upstream", async () => {
      const customer = await createCustomer(routed);
      const mark = stubA.requests.length;
      const job = await runJob(routed, customer.apiKey, {
        model: SCENARIO.small, prompt: "a collage of thirty tiles", aspect_ratio: "1:1", resolution: "1K", input_images_urls: urls(30),
      });
      assert.equal(job.status, "done", JSON.stringify(job));
      const upstream = onlyRequest(stubA, mark, { model: SCENARIO.small });
      assert.equal(userParts(upstream.body).filter((p) => p.inlineData?.data === INPUT_PNG_B64).length, 30);
      assert.equal(await settledCharge(routed, customer.apiKey), pico("0.05"));
    });

    it("accepts 31 input images for a model whose route has the default limit of 100", async () => {
      const customer = await createCustomer(routed);
      const created = await postGeneration(routed, customer.apiKey, {
        model: SCENARIO.f503, prompt: "a bigger collage", aspect_ratio: "1:1", resolution: "1K", input_images_urls: urls(31),
      });
      assert.equal(created.status, 202, created.text);
      const job = await finishedJob(routed, customer.apiKey, created.json.job_id);
      assert.equal(job.status, "done", JSON.stringify(job));
    });

    it("lists every route of the table with its settings in GET /admin/v1/routes", async () => {
      const routes = await routesByName(routed);
      assert.equal(routes.size, 23);
      const small = routes.get("small");
      assert.equal(small.max_input_images, 30);
      assert.equal(small.base_url, stubA.url);
      assert.deepEqual(small.models, [SCENARIO.small]);
      assert.equal(routes.get("stall-a").timeout_ms, STALL_TIMEOUT_MS);
      assert.equal(routes.get("f503-b").weight, 0);
      assert.equal(routes.get("f503-b").max_input_images, 100);
      assert.ok(JSON.stringify([...routes.values()]).indexOf("route-a-key") === -1, "route keys are not shown");
    });
  });

  describe("the job's timeout", () => {
    it("bounds retries and failover: both routes stall, the job fails with timeout within ~30 s of starting and releases the money", async () => {
      const job = await finishedJob(routed, slowCustomer.apiKey, slowJobId, 60_000);
      assert.equal(job.status, "failed", JSON.stringify(job));
      assert.equal(job.error, "timeout");
      const ran = Date.parse(job.finished_at) - Date.parse(job.started_at);
      assert.ok(ran >= 29_500 && ran <= 35_000, `the job ran ${ran} ms for a 30 s timeout`);

      // Route A gave up after its own timeout and B was tried, inside the job's budget.
      const [first] = requestsSince(slowA, 0, { model: SCENARIO.slow });
      const [second] = requestsSince(slowB, 0, { model: SCENARIO.slow });
      assert.ok(first && second, `both routes were tried: A ${seenBy(slowA)}, B ${seenBy(slowB)}`);
      assert.ok(second.receivedAt - first.receivedAt >= SLOW_ROUTE_TIMEOUT_MS - 500);
      // The job's end also ends the upstream call it was waiting for.
      await slowB.waitForClientClose(second.index, { timeoutMs: 5_000 });
      assert.equal(await settledCharge(routed, slowCustomer.apiKey), 0n);
    });
  });
});
