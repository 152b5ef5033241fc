// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { RoutedVendorProvider } from "../../src/adapters/vendor/routed-vendor-provider.js";
import { UpstreamError, type UpstreamFailure } from "../../src/adapters/vendor/upstream-error.js";
import { VendorClient } from "../../src/adapters/vendor/vendor-client.js";
import {
  answerPartsOf, chunkText, interpret, refusalOf, usageOf, videoOf, type VendorOperation, type VendorResponse,
} from "../../src/adapters/vendor/vendor-response.js";
import { findModel } from "../../src/domain/catalog/models.js";
import { parsePriceTable } from "../../src/domain/pricing/price-table.js";
import { tokenCost } from "../../src/domain/pricing/quotes.js";
import { ProviderError } from "../../src/ports/provider.js";
import { eventually, pico } from "../support/harness.js";
import { probePng } from "../support/media-probe.js";
import { REPO_ROOT } from "../support/repo.js";

/*
 * The vendor's documented response shapes (test/fixtures/vendor/) as the
 * adapter reads them: text, inline images with a thought draft, mixed parts,
 * usage split by modality, refusals, the video operation's states, and a 429
 * error body, whose only job is to be classified as retryable.
 */

const FIXTURES = join(REPO_ROOT, "test", "fixtures", "vendor");
const load = async <T = VendorResponse>(name: string): Promise<T> => JSON.parse(await readFile(join(FIXTURES, name), "utf8")) as T;

/** Every fixture this file tests; a new fixture without a test here fails the first test. */
const COVERED = [
  "blocked-prompt.json", "error-429.json", "function-call-thinking.json", "image-inline.json", "mixed-text-image.json", "safety-finish.json", "text.json",
  "usage-modalities.json", "video-filtered.json", "video-operation-done.json", "video-operation-error.json", "video-operation-pending.json",
];

const VIDEO_MODEL = "videomodel-3.1-generate-001";
const DEFAULT_PRICES = join(REPO_ROOT, "src", "config", "default-prices.json");

function providerError(run: () => unknown, code: string, mentions?: RegExp): ProviderError {
  let caught: unknown;
  try {
    run();
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof ProviderError, `expected a ProviderError ${code}, got ${String(caught)}`);
  assert.equal(caught.code, code);
  if (mentions) assert.match(caught.message, mentions);
  return caught;
}

describe("vendor response fixtures through vendor-response.ts", () => {
  it("covers every fixture in test/fixtures/vendor", async () => {
    assert.deepEqual((await readdir(FIXTURES)).filter((f) => f.endsWith(".json")).sort(), [...COVERED].sort());
  });

  it("text.json: the answer text, usage and STOP; not a refusal; the same text as a stream chunk", async () => {
    const response = await load("text.json");
    const haiku = "A haiku about the sea:\n\nGrey waves fold and break,\nsalt wind carries gull voices,\nthe tide keeps its time.";
    assert.equal(refusalOf(response), undefined);
    const answer = interpret(response);
    assert.equal(answer.text, haiku);
    assert.equal(answer.image, undefined);
    assert.equal(answer.finishReason, "STOP");
    assert.deepEqual(answer.usage, { promptTokens: 9, textOutputTokens: 27, videoOutputTokens: 0 });
    assert.equal(chunkText(response), haiku);
  });

  it("function-call-thinking.json: the thought and the signed function call as parts, thoughts as output; not a refusal; no text", async () => {
    const response = await load("function-call-thinking.json");
    assert.equal(refusalOf(response), undefined);
    assert.equal(chunkText(response), "");
    assert.deepEqual(answerPartsOf(response), [
      { kind: "text", text: "**Checking the weather**\n\nThe user wants the weather in Paris, so I call get_weather with the city.", thought: true },
      {
        kind: "function_call", call: { name: "get_weather", args: { city: "Paris", unit: "celsius" } },
        thoughtSignature: new Uint8Array(Buffer.from("CiQBcsjafLSsZ2Zp7Vmk2bO3FSEjxHtL0Ypq3YmrhnqQsiGmDm8=", "base64")),
      },
    ]);
    assert.deepEqual(usageOf(response.usageMetadata), { promptTokens: 71, textOutputTokens: 18 + 64, videoOutputTokens: 0, thoughtTokens: 64 });
    assert.equal(answerPartsOf(await load("text.json")), undefined, "a plain answer is its text");
    const withId = { candidates: [{ content: { parts: [{ functionCall: { id: "c1", name: "f" } }] }, finishReason: "STOP" }] };
    assert.deepEqual(answerPartsOf(withId), [{ kind: "function_call", call: { id: "c1", name: "f", args: {} } }]);
    const filtered = { candidates: [{ content: { parts: [{ functionCall: { name: "f" } }] }, finishReason: "SAFETY" }] };
    assert.equal(refusalOf(filtered), undefined, "a function call is output: a SAFETY finish after it withholds nothing");
  });

  it("image-inline.json: delivers the final image, not the thought draft, with its caption; thinking counts as output", async () => {
    const response = await load("image-inline.json");
    const parts = response.candidates![0]!.content!.parts!;
    const draft = parts.find((p) => p.thought && p.inlineData)!;
    const final = parts.filter((p) => !p.thought && p.inlineData).at(-1)!;
    assert.deepEqual(probePng(Buffer.from(draft.inlineData!.data!, "base64")), { width: 2, height: 2 });

    const answer = interpret(response);
    assert.equal(answer.text, "Here is a watercolor of a lighthouse at dawn.");
    assert.equal(answer.image?.mimeType, "image/png");
    assert.deepEqual(Buffer.from(answer.image!.bytes), Buffer.from(final.inlineData!.data!, "base64"));
    assert.deepEqual(probePng(answer.image!.bytes), { width: 4, height: 4 });
    // candidatesTokenCount 1132 + thoughtsTokenCount 214: the vendor bills thinking as output.
    assert.deepEqual(answer.usage, { promptTokens: 14, textOutputTokens: 1132 + 214, videoOutputTokens: 0, thoughtTokens: 214 });
    assert.equal(chunkText(response), "Here is a watercolor of a lighthouse at dawn.");
  });

  it("mixed-text-image.json: joins the text parts around the image and keeps the image", async () => {
    const response = await load("mixed-text-image.json");
    const answer = interpret(response);
    assert.equal(answer.text, "Step 1: sketch the outline of the fox. Step 2: add the orange fur and the white tail tip.");
    assert.deepEqual(probePng(answer.image!.bytes), { width: 8, height: 4 });
    assert.equal(answer.image!.mimeType, "image/png");
    assert.deepEqual(answer.usage, { promptTokens: 268, textOutputTokens: 1142, videoOutputTokens: 0 });
  });

  it("usage-modalities.json: splits output into TEXT 12 and VIDEO 258, which the omni prices bill exactly", async () => {
    const response = await load("usage-modalities.json");
    const usage = usageOf(response.usageMetadata);
    assert.deepEqual(usage, { promptTokens: 1550, textOutputTokens: 12, videoOutputTokens: 258 });
    assert.deepEqual(interpret(response).usage, usage);
    assert.equal(interpret(response).text, "The clip shows a cyclist crossing a bridge.");
    const prices = parsePriceTable(JSON.parse(await readFile(DEFAULT_PRICES, "utf8"))).get("aimodel-omni-1.1-flash");
    // 1550 × 0.50 + 12 × 2.00 + 258 × 12.00 per 1M = 775 + 24 + 3096 millionths.
    assert.equal(tokenCost("aimodel-omni-1.1-flash", prices, usage), pico("0.003895"));
  });

  it("usageOf treats absent counts as zero", () => {
    assert.deepEqual(usageOf(undefined), { promptTokens: 0, textOutputTokens: 0, videoOutputTokens: 0 });
    assert.deepEqual(usageOf({ promptTokenCount: 5 }), { promptTokens: 5, textOutputTokens: 0, videoOutputTokens: 0 });
  });

  it("blocked-prompt.json: a prompt_blocked refusal naming the reason, thrown by interpret, with no text", async () => {
    const response = await load("blocked-prompt.json");
    const refusal = refusalOf(response);
    assert.ok(refusal instanceof ProviderError);
    assert.equal(refusal.code, "prompt_blocked");
    assert.match(refusal.message, /SAFETY/);
    providerError(() => interpret(response), "prompt_blocked");
    assert.equal(chunkText(response), "");
    assert.deepEqual(usageOf(response.usageMetadata), { promptTokens: 11, textOutputTokens: 0, videoOutputTokens: 0 });
  });

  it("safety-finish.json: a candidate with IMAGE_SAFETY and no content is output_blocked", async () => {
    const response = await load("safety-finish.json");
    assert.equal(refusalOf(response)?.code, "output_blocked");
    providerError(() => interpret(response), "output_blocked", /IMAGE_SAFETY/);
    assert.equal(chunkText(response), "");
  });

  it("a safety finish that still carries content is an answer, not a refusal", async () => {
    const response = await load("text.json");
    response.candidates![0]!.finishReason = "SAFETY";
    assert.equal(refusalOf(response), undefined);
    assert.ok(interpret(response).text!.startsWith("A haiku"));
  });

  it("video-operation-done.json: the video is the sample's uri", async () => {
    const operation = await load<VendorOperation>("video-operation-done.json");
    assert.equal(operation.done, true);
    assert.deepEqual(videoOf(operation), { uri: "https://upstream.example/v1beta/files/c8v4z2n6t0rs:download?alt=media" });
  });

  it("an operation answering the video inline gives its bytes", async () => {
    const bytes = Buffer.from("not really an mp4");
    const operation: VendorOperation = {
      name: "models/x/operations/y", done: true,
      response: { generateVideoResponse: { generatedSamples: [{ video: { bytesBase64Encoded: bytes.toString("base64") } }] } },
    };
    const video = videoOf(operation);
    assert.ok("bytes" in video);
    assert.deepEqual(Buffer.from(video.bytes), bytes);
  });

  it("video-filtered.json: output_blocked with the vendor's reason", async () => {
    const operation = await load<VendorOperation>("video-filtered.json");
    assert.equal(operation.done, true);
    providerError(() => videoOf(operation), "output_blocked", /safety settings for person generation/);
  });

  it("video-operation-error.json: the operation's error fails the job with its message", async () => {
    const operation = await load<VendorOperation>("video-operation-error.json");
    providerError(() => videoOf(operation), "generation_failed", /internal error/);
  });

  it("video-operation-pending.json: not done yet, so the adapter must poll again", async () => {
    const operation = await load<VendorOperation>("video-operation-pending.json");
    assert.ok(!operation.done);
    assert.match(operation.name!, /^models\/videomodel-3\.1-generate-001\/operations\//);
  });
});

describe("upstream failures: which route faults fail over", () => {
  const failure = (kind: UpstreamFailure, status?: number) => new UpstreamError(kind, `${kind} ${status ?? ""}`, status);

  it("retries 429 and 5xx on another route, never another 4xx", () => {
    for (const status of [429, 500, 502, 503, 504]) assert.equal(failure("http", status).retryable, true, `${status}`);
    for (const status of [400, 401, 403, 404, 409, 422]) assert.equal(failure("http", status).retryable, false, `${status}`);
  });

  it("retries connect errors, malformed bodies, stalls, drops and timeouts", () => {
    for (const kind of ["connect", "malformed", "stalled", "dropped", "timeout"] as const) assert.equal(failure(kind).retryable, true, kind);
  });

  describe("over HTTP from a local server answering the fixtures", () => {
    let server: Server;
    let origin: string;
    const seen: { url: string; key: string | undefined }[] = [];
    let answer: (request: IncomingMessage) => { status: number; body: unknown; type?: string };

    before(async () => {
      server = createServer((request, response) => {
        seen.push({ url: request.url ?? "", key: request.headers["x-vendor-api-key"] as string | undefined });
        request.resume();
        request.on("end", () => {
          const { status, body, type = "application/json" } = answer(request);
          const bytes = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
          response.writeHead(status, { "content-type": type, "content-length": bytes.length }).end(bytes);
        });
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(() => new Promise<void>((resolve) => server.close(() => resolve())));

    const route = () => ({ name: "fixture", baseUrl: origin, apiKey: "fixture-key", weight: 1, timeoutMs: 5_000, maxInputImages: 100, models: ["*"] });

    it("error-429.json: a 429 is a retryable UpstreamError carrying the vendor's message", async () => {
      const body = await load<{ error: { message: string } }>("error-429.json");
      answer = () => ({ status: 429, body });
      const client = new VendorClient(route());
      const error = await client.generateContent("aimodel-3.5-flash", { contents: [] }, new AbortController().signal).then(
        () => assert.fail("a 429 must not resolve"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof UpstreamError, String(error));
      assert.equal(error.failure, "http");
      assert.equal(error.status, 429);
      assert.equal(error.retryable, true);
      assert.ok(error.message.includes(body.error.message), error.message);
    });

    /** Serves predict, then the given operations one poll at a time, then the MP4. */
    function videoUpstream(operations: VendorOperation[]) {
      let polls = 0;
      answer = (request) => {
        const url = request.url ?? "";
        if (url.endsWith(":predictLongRunning")) return { status: 200, body: { name: operations[0]!.name } };
        if (url.includes("/operations/")) return { status: 200, body: operations[Math.min(polls++, operations.length - 1)] };
        if (url.includes(":download")) return { status: 200, body: Buffer.from("mp4 bytes"), type: "video/mp4" };
        return { status: 404, body: { error: { code: 404, message: "no" } } };
      };
      return () => polls;
    }

    const generateVideo = () =>
      new RoutedVendorProvider({ routes: [route()], pausedRoutes: async () => new Set(), pollIntervalMs: 5 }).generateVideo(
        { model: findModel(VIDEO_MODEL)!, prompt: "waves", resolution: "720p", aspectRatio: "16:9", durationSeconds: 4, inputImages: [] },
        new AbortController().signal,
      );

    it("pending then done: polls until done and downloads the uri with the key", async () => {
      const pending = await load<VendorOperation>("video-operation-pending.json");
      const done = await load<VendorOperation>("video-operation-done.json");
      const sample = done.response!.generateVideoResponse!.generatedSamples![0]!.video!;
      sample.uri = sample.uri!.replace("https://upstream.example", origin);
      const polls = videoUpstream([pending, done]);
      const start = seen.length;
      const output = await generateVideo();
      assert.equal(polls(), 2);
      assert.equal(Buffer.from(output.media!.bytes).toString(), "mp4 bytes");
      assert.equal(output.media!.mimeType, "video/mp4");
      const calls = seen.slice(start);
      assert.deepEqual(calls.map((c) => c.url.replace(/\?.*/, "").split(/[/:]/).at(-1)), ["predictLongRunning", "d2p9k7xw1q4m", "d2p9k7xw1q4m", "download"]);
      assert.ok(calls.every((c) => c.key === "fixture-key"));
    });

    it("filtered or failed operations fail the video with output_blocked or generation_failed", async () => {
      const pending = await load<VendorOperation>("video-operation-pending.json");
      videoUpstream([pending, await load<VendorOperation>("video-filtered.json")]);
      await assert.rejects(generateVideo(), (e: unknown) => e instanceof ProviderError && e.code === "output_blocked");
      videoUpstream([pending, await load<VendorOperation>("video-operation-error.json")]);
      await assert.rejects(generateVideo(), (e: unknown) => e instanceof ProviderError && e.code === "generation_failed");
    });

    /** Serves predict, then answers each poll with the next of `polls` (a status, or the operation), then the MP4. */
    function flakyPolls(polls: (number | VendorOperation)[]) {
      const asked: number[] = [];
      answer = (request) => {
        const url = request.url ?? "";
        if (url.endsWith(":predictLongRunning")) return { status: 200, body: { name: "operations/flaky" } };
        if (url.includes("/operations/")) {
          const next = polls[Math.min(asked.length, polls.length - 1)]!;
          asked.push(typeof next === "number" ? next : 200);
          return typeof next === "number" ? { status: next, body: { error: { code: next, message: `answered ${next}` } } } : { status: 200, body: next };
        }
        return { status: 404, body: { error: { code: 404, message: "no" } } };
      };
      return asked;
    }

    it("when a poll of a running video gets a passing fault (503, 429), then the same route is asked again until it answers", async () => {
      const inline: VendorOperation = {
        name: "operations/flaky", done: true,
        response: { generateVideoResponse: { generatedSamples: [{ video: { bytesBase64Encoded: Buffer.from("mp4").toString("base64") } }] } },
      };
      const asked = flakyPolls([503, 429, 503, inline]);
      const output = await generateVideo();
      assert.deepEqual(asked, [503, 429, 503, 200]);
      assert.equal(Buffer.from(output.media!.bytes).toString(), "mp4");
    });

    it("when a poll of a running video is refused (400), then the video fails upstream_rejected without asking again", async () => {
      const asked = flakyPolls([503, 400, 503]);
      await assert.rejects(generateVideo(), (e: unknown) => e instanceof ProviderError && e.code === "upstream_rejected" && e.message.includes("answered 400"));
      assert.deepEqual(asked, [503, 400]);
    });

    it("when the job is aborted while a poll's fault is waited out, then the video ends with the abort's reason at once", async () => {
      const asked = flakyPolls([503]);
      const controller = new AbortController();
      const provider = new RoutedVendorProvider({ routes: [route()], pausedRoutes: async () => new Set(), pollIntervalMs: 60_000 });
      const video = provider.generateVideo(
        { model: findModel(VIDEO_MODEL)!, prompt: "waves", resolution: "720p", aspectRatio: "16:9", durationSeconds: 4, inputImages: [] },
        controller.signal,
      );
      await eventually(async () => asked.length, (count) => count === 1, { what: "the first poll" });
      const reason = new Error("the job was canceled");
      controller.abort(reason);
      await assert.rejects(video, (e: unknown) => e === reason);
      assert.equal(asked.length, 1);
    });
  });
});
