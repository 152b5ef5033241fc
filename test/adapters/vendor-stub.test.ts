// backends: embedded
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { createParser } from "eventsource-parser";
import { probeMp4, probePng } from "../support/media-probe.js";
import {
  INPUT_MEDIA_TOKENS, OMNI_VIDEO_TOKENS, THOUGHTS_TOKENS, VENDOR_KEY_HEADER,
  startVendorStub, stubAnswer, stubImageCaption, stubTextChunks, stubTokens,
  type UsageMetadata, type VendorStub,
} from "../support/vendor-stub.js";
import { REPO_ROOT } from "../support/repo.js";

/**
 * The upstream stub is what the vendor adapter's tests stand on, so its wire
 * format, content rules and switches are pinned here with plain fetch, before
 * any adapter code reads them.
 */

interface Part {
  text?: string;
  thought?: boolean;
  thoughtSignature?: string;
  inlineData?: { mimeType: string; data: string };
}
interface GenerateResponse {
  candidates?: { content?: { role: string; parts: Part[] }; finishReason?: string; index?: number }[];
  promptFeedback?: { blockReason: string };
  usageMetadata: UsageMetadata;
  modelVersion: string;
  responseId: string;
}

const TEXT_MODEL = "aimodel-3.5-flash";
const PRO_TEXT_MODEL = "aimodel-3.1-pro-preview";
const PRO_IMAGE_MODEL = "aimodel-3-pro-image";
const OMNI_MODEL = "aimodel-omni-1.1-flash";
const VIDEO_MODEL = "videomodel-3.1-generate-001";

const userTurn = (text: string, extra: Record<string, unknown> = {}) => ({ contents: [{ role: "user", parts: [{ text }] }], ...extra });
const modelUsage = (details: { modality: string; tokenCount: number }[] | undefined, modality: string) =>
  details?.find((d) => d.modality === modality)?.tokenCount;

let stub: VendorStub;

function vendorFetch(
  method: string,
  path: string,
  { body, key = stub.apiKey, signal, rawBody }: { body?: unknown; key?: string | null; signal?: AbortSignal; rawBody?: string } = {},
) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key !== null) headers[VENDOR_KEY_HEADER] = key;
  const url = path.startsWith("http") ? path : `${stub.url}/v1beta/${path}`;
  return fetch(url, { method, headers, body: rawBody ?? (body === undefined ? undefined : JSON.stringify(body)), signal });
}

const generate = (model: string, body: unknown, options: { key?: string | null; signal?: AbortSignal } = {}) =>
  vendorFetch("POST", `models/${model}:generateContent`, { body, ...options });
const stream = (model: string, body: unknown, options: { key?: string | null; signal?: AbortSignal } = {}) =>
  vendorFetch("POST", `models/${model}:streamGenerateContent?alt=sse`, { body, ...options });

async function assertVendorError(response: Response, code: number, status: string) {
  assert.equal(response.status, code);
  assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
  const body = (await response.json()) as { error: { code: number; status: string; message: string; details?: unknown[] } };
  assert.equal(body.error.code, code);
  assert.equal(body.error.status, status);
  assert.ok(body.error.message.length > 0);
  return body.error;
}

/** Parses an SSE body with eventsource-parser, as an SDK would. */
function sseEvents(text: string): GenerateResponse[] {
  const events: GenerateResponse[] = [];
  const parser = createParser({ onEvent: (event) => events.push(JSON.parse(event.data) as GenerateResponse) });
  parser.feed(text);
  return events;
}

/** Reads SSE events as they arrive until `count` have been seen; returns them and the still-open reader. */
async function readEvents(response: Response, count: number) {
  const events: string[] = [];
  const parser = createParser({ onEvent: (event) => events.push(event.data) });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  while (events.length < count) {
    const { done, value } = await reader.read();
    if (done) break;
    parser.feed(decoder.decode(value, { stream: true }));
  }
  return { events, reader };
}

const textOf = (response: GenerateResponse) =>
  (response.candidates?.[0]?.content?.parts ?? []).filter((p) => !p.thought).map((p) => p.text ?? "").join("");

describe("vendor upstream stub", () => {
  before(async () => {
    stub = await startVendorStub();
  });
  after(async () => {
    await stub.close();
  });
  beforeEach(() => {
    stub.reset();
  });

  describe("generateContent", () => {
    test("answers a text model with the documented text and usage", async () => {
      const prompt = "Write a haiku about the sea";
      const response = await generate(TEXT_MODEL, userTurn(prompt));
      assert.equal(response.status, 200);
      assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
      const body = (await response.json()) as GenerateResponse;
      const answer = stubAnswer(prompt);
      assert.deepEqual(body.candidates, [
        { content: { role: "model", parts: [{ text: answer }] }, finishReason: "STOP", index: 0 },
      ]);
      assert.deepEqual(body.usageMetadata, {
        promptTokenCount: stubTokens(prompt),
        candidatesTokenCount: stubTokens(answer),
        totalTokenCount: stubTokens(prompt) + stubTokens(answer),
        promptTokensDetails: [{ modality: "TEXT", tokenCount: stubTokens(prompt) }],
        candidatesTokensDetails: [{ modality: "TEXT", tokenCount: stubTokens(answer) }],
      });
      assert.equal(body.modelVersion, TEXT_MODEL);
      assert.ok(body.responseId.length > 0);

      const [record] = stub.requests;
      assert.equal(record!.kind, "generate");
      assert.equal(record!.model, TEXT_MODEL);
      assert.equal(record!.headers[VENDOR_KEY_HEADER], stub.apiKey);
      assert.deepEqual(record!.body, userTurn(prompt));
      assert.equal(record!.status, 200);
      assert.deepEqual(record!.lastUsage, body.usageMetadata);
      await stub.waitFor((all) => all[0]?.finished, { what: "the response to finish" });
    });

    test("cuts the answer at maxOutputTokens and finishes with MAX_TOKENS", async () => {
      const response = await generate(TEXT_MODEL, userTurn("tell me everything", { generationConfig: { maxOutputTokens: 3 } }));
      const body = (await response.json()) as GenerateResponse;
      assert.equal(textOf(body), stubAnswer("tell me everything").slice(0, 12));
      assert.equal(body.candidates![0]!.finishReason, "MAX_TOKENS");
      assert.equal(body.usageMetadata.candidatesTokenCount, 3);
    });

    test("takes the last user text as the prompt and counts every text part, system text and input image", async () => {
      const body = {
        systemInstruction: { parts: [{ text: "You are terse." }] },
        contents: [
          { role: "user", parts: [{ text: "first question" }] },
          { role: "model", parts: [{ text: "first reply" }] },
          { role: "user", parts: [{ text: "the real question" }, { inline_data: { mime_type: "image/png", data: "iVBORw0KGgo=" } }] },
        ],
      };
      const result = (await (await generate(TEXT_MODEL, body)).json()) as GenerateResponse;
      assert.equal(textOf(result), stubAnswer("the real question"));
      const textTokens = ["You are terse.", "first question", "first reply", "the real question"].reduce((sum, t) => sum + stubTokens(t), 0);
      assert.equal(result.usageMetadata.promptTokenCount, textTokens + INPUT_MEDIA_TOKENS);
      assert.deepEqual(result.usageMetadata.promptTokensDetails, [
        { modality: "TEXT", tokenCount: textTokens },
        { modality: "IMAGE", tokenCount: INPUT_MEDIA_TOKENS },
      ]);
    });

    test("a thinking model adds thoughtsTokenCount to the total and puts a thought part first when asked", async () => {
      const prompt = "why is the sky blue";
      const body = userTurn(prompt, { generationConfig: { thinkingConfig: { includeThoughts: true } } });
      const result = (await (await generate(PRO_TEXT_MODEL, body)).json()) as GenerateResponse;
      const parts = result.candidates![0]!.content!.parts;
      assert.equal(parts[0]!.thought, true);
      assert.deepEqual(parts.slice(1), [{ text: stubAnswer(prompt) }]);
      const usage = result.usageMetadata;
      assert.equal(usage.thoughtsTokenCount, THOUGHTS_TOKENS);
      assert.equal(usage.candidatesTokenCount, stubTokens(stubAnswer(prompt)));
      assert.equal(usage.totalTokenCount, stubTokens(prompt) + stubTokens(stubAnswer(prompt)) + THOUGHTS_TOKENS);
    });

    test("a pro image model answers a thought draft, a caption and a final PNG sized by imageConfig", async () => {
      const prompt = "a lighthouse at dawn";
      const body = userTurn(prompt, { generationConfig: { responseModalities: ["TEXT", "IMAGE"], imageConfig: { aspectRatio: "16:9", imageSize: "2K" } } });
      const response = await generate(PRO_IMAGE_MODEL, body);
      assert.equal(response.status, 200);
      const result = (await response.json()) as GenerateResponse;
      const [draft, caption, final, ...rest] = result.candidates![0]!.content!.parts;
      assert.equal(rest.length, 0);
      assert.equal(draft!.thought, true);
      assert.deepEqual(probePng(Buffer.from(draft!.inlineData!.data, "base64")), { width: 256, height: 144 });
      assert.deepEqual(caption, { text: stubImageCaption(prompt) });
      assert.equal(final!.inlineData!.mimeType, "image/png");
      assert.equal(final!.thought, undefined);
      assert.ok(final!.thoughtSignature);
      assert.deepEqual(probePng(Buffer.from(final!.inlineData!.data, "base64")), { width: 2048, height: 1152 });
      assert.equal(result.candidates![0]!.finishReason, "STOP");

      const usage = result.usageMetadata;
      const textTokens = stubTokens(stubImageCaption(prompt));
      assert.deepEqual(usage.candidatesTokensDetails, [
        { modality: "TEXT", tokenCount: textTokens },
        { modality: "IMAGE", tokenCount: 1120 },
      ]);
      assert.equal(usage.candidatesTokenCount, 1120 + textTokens);
      assert.equal(usage.thoughtsTokenCount, THOUGHTS_TOKENS);
      assert.equal(usage.totalTokenCount, stubTokens(prompt) + 1120 + textTokens + THOUGHTS_TOKENS);
    });

    test("an image model answers only the image when responseModalities is IMAGE, and 4K costs 2000 image tokens", async () => {
      const body = userTurn("a tall tower", { generationConfig: { responseModalities: ["IMAGE"], imageConfig: { aspectRatio: "1:4", imageSize: "4K" } } });
      const result = (await (await generate("aimodel-nbx-2.1", body)).json()) as GenerateResponse;
      const parts = result.candidates![0]!.content!.parts;
      assert.equal(parts.length, 1, "no draft (not a pro model) and no caption");
      assert.deepEqual(probePng(Buffer.from(parts[0]!.inlineData!.data, "base64")), { width: 1024, height: 4096 });
      assert.deepEqual(result.usageMetadata.candidatesTokensDetails, [{ modality: "IMAGE", tokenCount: 2000 }]);
      assert.equal(result.usageMetadata.thoughtsTokenCount, undefined);
    });

    test("without imageConfig an image model answers a square 1K PNG", async () => {
      const result = (await (await generate("aimodel-3.1-flash-image", userTurn("a cat"))).json()) as GenerateResponse;
      const image = result.candidates![0]!.content!.parts.find((p) => p.inlineData);
      assert.deepEqual(probePng(Buffer.from(image!.inlineData!.data, "base64")), { width: 1024, height: 1024 });
    });
  });

  describe("requests the vendor refuses", () => {
    test("a missing or wrong x-vendor-api-key gets 401 UNAUTHENTICATED on every endpoint", async () => {
      for (const key of [null, "wrong-key"]) {
        await assertVendorError(await generate(TEXT_MODEL, userTurn("hi"), { key }), 401, "UNAUTHENTICATED");
        await assertVendorError(await stream(TEXT_MODEL, userTurn("hi"), { key }), 401, "UNAUTHENTICATED");
        const predict = await vendorFetch("POST", `models/${VIDEO_MODEL}:predictLongRunning`, { body: { instances: [{ prompt: "x" }] }, key });
        await assertVendorError(predict, 401, "UNAUTHENTICATED");
      }
      assert.equal(stub.requests.length, 6);
      assert.equal(stub.requests[0]!.headers[VENDOR_KEY_HEADER], undefined);
      assert.equal(stub.requests[3]!.headers[VENDOR_KEY_HEADER], "wrong-key");
    });

    test("a stub started with its own apiKey accepts that key only", async () => {
      const own = await startVendorStub({ apiKey: "route-b-key" });
      try {
        const url = `${own.url}/v1beta/models/${TEXT_MODEL}:generateContent`;
        const post = (key: string) =>
          fetch(url, { method: "POST", headers: { [VENDOR_KEY_HEADER]: key, "content-type": "application/json" }, body: JSON.stringify(userTurn("hi")) });
        await assertVendorError(await post(stub.apiKey), 401, "UNAUTHENTICATED");
        assert.equal((await post("route-b-key")).status, 200);
        assert.equal(own.apiKey, "route-b-key");
      } finally {
        await own.close();
      }
    });

    test("invalid JSON, missing contents, an unknown imageSize or aspect ratio get 400 INVALID_ARGUMENT", async () => {
      await assertVendorError(await vendorFetch("POST", `models/${TEXT_MODEL}:generateContent`, { rawBody: "{not json" }), 400, "INVALID_ARGUMENT");
      await assertVendorError(await generate(TEXT_MODEL, { prompt: "no contents" }), 400, "INVALID_ARGUMENT");
      await assertVendorError(await generate(TEXT_MODEL, { contents: [] }), 400, "INVALID_ARGUMENT");
      for (const imageConfig of [{ imageSize: "2k" }, { aspectRatio: "auto" }, { aspectRatio: "7:3" }]) {
        const body = userTurn("x", { generationConfig: { imageConfig } });
        await assertVendorError(await generate("aimodel-3.1-flash-image", body), 400, "INVALID_ARGUMENT");
      }
    });

    test("unknown paths and video models on generateContent get 404 NOT_FOUND", async () => {
      await assertVendorError(await vendorFetch("POST", `models/${TEXT_MODEL}:countTokens`, { body: userTurn("x") }), 404, "NOT_FOUND");
      await assertVendorError(await vendorFetch("GET", `models/${TEXT_MODEL}:generateContent`), 404, "NOT_FOUND");
      await assertVendorError(await generate(VIDEO_MODEL, userTurn("x")), 404, "NOT_FOUND");
      await assertVendorError(await vendorFetch("POST", `models/${TEXT_MODEL}:predictLongRunning`, { body: { instances: [{ prompt: "x" }] } }), 404, "NOT_FOUND");
    });

    test("knownModels makes other model ids 404 NOT_FOUND", async () => {
      const own = await startVendorStub({ knownModels: [TEXT_MODEL] });
      try {
        const post = (model: string) =>
          fetch(`${own.url}/v1beta/models/${model}:generateContent`, {
            method: "POST",
            headers: { [VENDOR_KEY_HEADER]: own.apiKey },
            body: JSON.stringify(userTurn("x")),
          });
        assert.equal((await post(TEXT_MODEL)).status, 200);
        await assertVendorError(await post("aimodel-3.6-flash"), 404, "NOT_FOUND");
      } finally {
        await own.close();
      }
    });
  });

  describe("streamGenerateContent", () => {
    test("streams text as data events framed with \\r\\n\\r\\n, cumulative usage and STOP on the last, with no [DONE]", async () => {
      const prompt = "Tell me a short story about a lantern and a river at night";
      const response = await stream(TEXT_MODEL, userTurn(prompt));
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("content-type"), "text/event-stream");
      const raw = await response.text();
      assert.ok(!raw.includes("[DONE]"));
      const frames = raw.split("\r\n\r\n");
      assert.equal(frames.pop(), "", "the last event ends with a blank line");
      assert.ok(frames.every((f) => f.startsWith("data: ") && !f.includes("\n")), "one data line per event");

      const events = sseEvents(raw);
      const answer = stubAnswer(prompt);
      assert.equal(events.length, frames.length);
      assert.deepEqual(events.map(textOf), stubTextChunks(answer));
      assert.ok(events.length >= 3);
      let soFar = "";
      for (const [i, event] of events.entries()) {
        soFar += textOf(event);
        const last = i === events.length - 1;
        assert.equal(event.candidates![0]!.finishReason, last ? "STOP" : undefined);
        assert.equal(event.candidates![0]!.content!.role, "model");
        assert.equal(event.usageMetadata.promptTokenCount, stubTokens(prompt));
        assert.equal(event.usageMetadata.candidatesTokenCount, stubTokens(soFar), `cumulative usage on event ${i}`);
        assert.equal(event.responseId, events[0]!.responseId, "one responseId per stream");
      }
      assert.equal(soFar, answer);
      const record = await stub.waitFor((all) => (all[0]?.finished ? all[0] : undefined));
      assert.equal(record.chunksSent, events.length);
      assert.deepEqual(record.lastUsage, events.at(-1)!.usageMetadata);
    });

    test("the omni model splits output usage between TEXT and VIDEO, the VIDEO share growing to 258", async () => {
      const prompt = "describe the clip";
      const events = sseEvents(await (await stream(OMNI_MODEL, userTurn(prompt))).text());
      const videoShares = events.map((e) => modelUsage(e.usageMetadata.candidatesTokensDetails, "VIDEO")!);
      assert.deepEqual(videoShares, [...videoShares].sort((a, b) => a - b), "cumulative");
      const final = events.at(-1)!.usageMetadata;
      const textTokens = stubTokens(stubAnswer(prompt));
      assert.deepEqual(final.candidatesTokensDetails, [
        { modality: "TEXT", tokenCount: textTokens },
        { modality: "VIDEO", tokenCount: OMNI_VIDEO_TOKENS },
      ]);
      assert.equal(final.candidatesTokenCount, textTokens + OMNI_VIDEO_TOKENS);
      assert.equal(final.totalTokenCount, stubTokens(prompt) + textTokens + OMNI_VIDEO_TOKENS);

      const whole = (await (await generate(OMNI_MODEL, userTurn(prompt))).json()) as GenerateResponse;
      assert.deepEqual(whole.usageMetadata, final, "generateContent reports the same totals");
    });

    test("streams an image answer one part per event, the final image last", async () => {
      const events = sseEvents(await (await stream(PRO_IMAGE_MODEL, userTurn("a fox"))).text());
      const parts = events.map((e) => e.candidates![0]!.content!.parts);
      assert.ok(parts.every((p) => p.length === 1));
      assert.equal(parts[0]![0]!.thought, true);
      assert.deepEqual(parts[1]![0], { text: stubImageCaption("a fox") });
      assert.ok(parts[2]![0]!.inlineData && !parts[2]![0]!.thought);
      assert.equal(events.at(-1)!.candidates![0]!.finishReason, "STOP");
      assert.equal(modelUsage(events.at(-1)!.usageMetadata.candidatesTokensDetails, "IMAGE"), 1120);
      assert.equal(modelUsage(events[1]!.usageMetadata.candidatesTokensDetails, "IMAGE"), undefined, "no image tokens before the image");
    });

    test("without alt=sse the stream is one JSON array of the same chunks", async () => {
      const response = await vendorFetch("POST", `models/${TEXT_MODEL}:streamGenerateContent`, { body: userTurn("hello there") });
      assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
      const chunks = (await response.json()) as GenerateResponse[];
      assert.ok(Array.isArray(chunks));
      assert.equal(chunks.map(textOf).join(""), stubAnswer("hello there"));
    });

    test("chunkIntervalMs spaces the events out", async () => {
      stub.chunkIntervalMs = 40;
      const started = Date.now();
      const events = sseEvents(await (await stream(TEXT_MODEL, userTurn("one two"))).text());
      assert.ok(Date.now() - started >= 40 * (events.length - 1), `${events.length} events in ${Date.now() - started} ms`);
    });
  });

  describe("switches", () => {
    test("status: the next N requests get 503 UNAVAILABLE in the vendor shape, later ones succeed", async () => {
      const unavailable = stub.fault({ kind: "status", status: 503 }, { times: 2 });
      await assertVendorError(await generate(TEXT_MODEL, userTurn("a")), 503, "UNAVAILABLE");
      await assertVendorError(await stream(TEXT_MODEL, userTurn("a")), 503, "UNAVAILABLE");
      assert.equal((await generate(TEXT_MODEL, userTurn("a"))).status, 200);
      assert.equal(unavailable.hits, 2);
      assert.equal(unavailable.remaining, 0);
      assert.deepEqual(stub.requests.map((r) => r.fault?.kind), ["status", "status", undefined]);
    });

    test("status 500 is INTERNAL; 429 is RESOURCE_EXHAUSTED with RetryInfo and an optional Retry-After", async () => {
      stub.fault({ kind: "status", status: 500 }, { times: 1 });
      await assertVendorError(await generate(TEXT_MODEL, userTurn("a")), 500, "INTERNAL");

      stub.fault({ kind: "status", status: 429, retryDelaySeconds: 3, retryAfterHeader: 3 }, { times: 1 });
      const limited = await generate(TEXT_MODEL, userTurn("a"));
      assert.equal(limited.headers.get("retry-after"), "3");
      const error = await assertVendorError(limited, 429, "RESOURCE_EXHAUSTED");
      assert.ok(error.details?.some((d) => (d as { retryDelay?: string }).retryDelay === "3s"));
    });

    test("status with a raw body answers a non-JSON error page", async () => {
      stub.fault({ kind: "status", status: 502, rawBody: "<html><body>502 Bad Gateway</body></html>" }, { times: 1 });
      const response = await generate(TEXT_MODEL, userTurn("a"));
      assert.equal(response.status, 502);
      assert.match(response.headers.get("content-type") ?? "", /^text\/html/);
      assert.match(await response.text(), /Bad Gateway/);
    });

    test("a switch limited to one path kind or model leaves other requests alone", async () => {
      stub.fault({ kind: "status", status: 500 }, { on: "stream" });
      stub.fault({ kind: "status", status: 503 }, { model: "aimodel-3.6-flash" });
      assert.equal((await generate(TEXT_MODEL, userTurn("a"))).status, 200);
      assert.equal((await stream(TEXT_MODEL, userTurn("a"))).status, 500);
      assert.equal((await generate("aimodel-3.6-flash", userTurn("a"))).status, 503);
      assert.equal((await generate("aimodel-3.7-flash", userTurn("a"))).status, 200);
    });

    test("a removed switch stops applying", async () => {
      const failing = stub.fault({ kind: "status", status: 500 });
      assert.equal((await generate(TEXT_MODEL, userTurn("a"))).status, 500);
      failing.remove();
      assert.equal((await generate(TEXT_MODEL, userTurn("a"))).status, 200);
    });

    test("latency: the next request waits the configured time before any byte, the one after does not", async () => {
      stub.delay(300, { times: 1 });
      assert.equal((await generate(TEXT_MODEL, userTurn("slow"))).status, 200);
      assert.equal((await generate(TEXT_MODEL, userTurn("fast"))).status, 200);
      const [slow, fast] = stub.requests;
      assert.equal(slow!.latencyMs, 300);
      assert.ok(slow!.respondedAt! - slow!.receivedAt >= 295, `answered after ${slow!.respondedAt! - slow!.receivedAt} ms`);
      assert.equal(fast!.latencyMs, 0);
    });

    test("latency combines with a fault: the error comes after the delay", async () => {
      stub.delay(200, { times: 1 });
      stub.fault({ kind: "status", status: 503 }, { times: 1 });
      await assertVendorError(await generate(TEXT_MODEL, userTurn("a")), 503, "UNAVAILABLE");
      const [record] = stub.requests;
      assert.ok(record!.respondedAt! - record!.receivedAt >= 195);
    });

    test("a client that gives up during the latency is recorded as closed, with nothing sent", async () => {
      stub.delay(30_000);
      const controller = new AbortController();
      const pending = generate(TEXT_MODEL, userTurn("a"), { signal: controller.signal });
      await stub.waitForRequest(0);
      controller.abort();
      await assert.rejects(pending, { name: "AbortError" });
      const record = await stub.waitForClientClose(0);
      assert.equal(record.status, undefined);
      assert.equal(record.finished, false);
    });

    test("malformed: a 200 whose JSON body is cut in half", async () => {
      stub.fault({ kind: "malformed" }, { times: 1 });
      const response = await generate(TEXT_MODEL, userTurn("a"));
      assert.equal(response.status, 200);
      assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
      const text = await response.text();
      assert.ok(text.startsWith('{"candidates"'));
      assert.throws(() => JSON.parse(text), SyntaxError);
    });

    test("malformed stream: good events, then one event whose JSON is cut, then the end", async () => {
      stub.fault({ kind: "malformed", afterChunks: 1 }, { on: "stream", times: 1 });
      const raw = await (await stream(TEXT_MODEL, userTurn("a b c d"))).text();
      const datas: string[] = [];
      createParser({ onEvent: (e) => datas.push(e.data) }).feed(raw);
      assert.equal(datas.length, 2);
      assert.equal(textOf(JSON.parse(datas[0]!) as GenerateResponse), "Upstream ");
      assert.throws(() => JSON.parse(datas[1]!), SyntaxError);
      assert.ok(raw.endsWith("\r\n\r\n"));
    });

    test("stall on a stream: K events, then silence until the client aborts; the stub records the close", async () => {
      stub.fault({ kind: "stall", afterChunks: 2 }, { on: "stream" });
      const controller = new AbortController();
      const response = await stream(TEXT_MODEL, userTurn("a story with many words in it"), { signal: controller.signal });
      const { events, reader } = await readEvents(response, 2);
      assert.equal(events.length, 2);
      await stub.waitFor((all) => all[0]?.chunksSent === 2);
      const stalled = reader.read();
      controller.abort();
      await assert.rejects(stalled, { name: "AbortError" });
      const record = await stub.waitForClientClose(0);
      assert.equal(record.clientClosed, true);
      assert.equal(record.closedByStub, false);
      assert.equal(record.finished, false);
      assert.equal(record.chunksSent, 2);
      assert.deepEqual(record.lastUsage, (JSON.parse(events[1]!) as GenerateResponse).usageMetadata);
      assert.ok(record.closedAt! >= record.respondedAt!);
    });

    test("stall on generateContent: headers, then no body until the client aborts", async () => {
      stub.fault({ kind: "stall" }, { on: "generate", times: 1 });
      const controller = new AbortController();
      const response = await generate(TEXT_MODEL, userTurn("a"), { signal: controller.signal });
      assert.equal(response.status, 200);
      const body = response.text();
      await stub.waitFor((all) => all[0]?.status === 200);
      controller.abort();
      await assert.rejects(body, { name: "AbortError" });
      const record = await stub.waitForClientClose(0);
      assert.deepEqual([record.finished, record.clientClosed], [false, true]);
    });

    test("drop before the headers: the connection closes with no response", async () => {
      stub.fault({ kind: "drop" }, { times: 1 });
      await assert.rejects(generate(TEXT_MODEL, userTurn("a")), TypeError);
      const record = await stub.waitFor((all) => (all[0]?.closedAt ? all[0] : undefined));
      assert.deepEqual([record.status, record.closedByStub, record.clientClosed], [undefined, true, false]);
      assert.equal((await generate(TEXT_MODEL, userTurn("a"))).status, 200, "only the next request was dropped");
    });

    test("drop after K stream events: the body breaks off after them", async () => {
      stub.fault({ kind: "drop", afterChunks: 2 }, { on: "stream", times: 1 });
      const response = await stream(TEXT_MODEL, userTurn("a story with many words in it"));
      const { events, reader } = await readEvents(response, 2);
      assert.equal(events.length, 2);
      await assert.rejects(async () => {
        for (;;) if ((await reader.read()).done) break;
      }, TypeError);
      const record = await stub.waitFor((all) => (all[0]?.closedAt ? all[0] : undefined));
      assert.deepEqual([record.chunksSent, record.closedByStub, record.clientClosed, record.finished], [2, true, false, false]);
    });

    test("drop mid-body of a JSON answer: the client sees a truncated body error", async () => {
      stub.fault({ kind: "drop", afterChunks: 1 }, { on: "generate", times: 1 });
      const response = await generate(TEXT_MODEL, userTurn("a"));
      assert.equal(response.status, 200);
      await assert.rejects(response.text(), TypeError);
    });

    test("blocked: promptFeedback.blockReason with prompt usage and no candidates", async () => {
      stub.fault({ kind: "blocked" }, { times: 2 });
      const prompt = "something forbidden";
      const whole = (await (await generate(TEXT_MODEL, userTurn(prompt))).json()) as GenerateResponse;
      assert.equal(whole.promptFeedback!.blockReason, "SAFETY");
      assert.equal(whole.candidates, undefined);
      assert.deepEqual(whole.usageMetadata, { promptTokenCount: stubTokens(prompt), totalTokenCount: stubTokens(prompt) });

      const events = sseEvents(await (await stream(TEXT_MODEL, userTurn(prompt))).text());
      assert.equal(events.length, 1, "the block is the first and only chunk");
      assert.equal(events[0]!.promptFeedback!.blockReason, "SAFETY");
      assert.equal(events[0]!.candidates, undefined);
    });

    test("safety finish: a candidate with finishReason IMAGE_SAFETY and no content", async () => {
      stub.fault({ kind: "safety-finish" }, { times: 1 });
      const result = (await (await generate(PRO_IMAGE_MODEL, userTurn("x"))).json()) as GenerateResponse;
      assert.deepEqual(result.candidates, [{ finishReason: "IMAGE_SAFETY", index: 0 }]);
      assert.equal(result.usageMetadata.candidatesTokenCount, undefined);
    });

    test("text-only: an image model answers text and no image", async () => {
      stub.fault({ kind: "text-only" }, { times: 1 });
      const result = (await (await generate("aimodel-3.1-flash-image", userTurn("a boat"))).json()) as GenerateResponse;
      assert.deepEqual(result.candidates![0]!.content!.parts, [{ text: stubImageCaption("a boat") }]);
      assert.deepEqual(result.usageMetadata.candidatesTokensDetails, [{ modality: "TEXT", tokenCount: stubTokens(stubImageCaption("a boat")) }]);
    });

    test("a fault kind that cannot apply to the asked path kind is refused when set", () => {
      assert.throws(() => stub.fault({ kind: "blocked" }, { on: "poll" }), /cannot apply/);
    });

    test("reset() forgets requests and switches", async () => {
      stub.fault({ kind: "status", status: 500 });
      stub.delay(10_000);
      stub.chunkIntervalMs = 500;
      stub.reset();
      assert.equal(stub.requests.length, 0);
      assert.equal(stub.chunkIntervalMs, 0);
      assert.equal((await generate(TEXT_MODEL, userTurn("a"))).status, 200);
      assert.equal(stub.requests.length, 1);
      assert.equal(stub.requests[0]!.latencyMs, 0);
    });
  });

  describe("long-running video", () => {
    async function startOperation(parameters: Record<string, unknown> = { durationSeconds: 4 }) {
      const response = await vendorFetch("POST", `models/${VIDEO_MODEL}:predictLongRunning`, { body: { instances: [{ prompt: "a drone over a glacier" }], parameters } });
      assert.equal(response.status, 200);
      const { name } = (await response.json()) as { name: string };
      assert.match(name, new RegExp(`^models/${VIDEO_MODEL}/operations/[0-9a-f]+$`));
      return name;
    }
    const poll = async (name: string) => (await (await vendorFetch("GET", name)).json()) as Record<string, any>;

    test("start, poll until done, download a real MP4 of the requested duration with the key", async () => {
      stub.videoPendingPolls = 2;
      const name = await startOperation({ durationSeconds: 4, resolution: "720p", aspectRatio: "16:9" });
      assert.deepEqual(await poll(name), { name, done: false });
      assert.deepEqual(await poll(name), { name, done: false });
      const done = await poll(name);
      assert.equal(done.done, true);
      assert.equal(done.response["@type"], "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse");
      const uri: string = done.response.generateVideoResponse.generatedSamples[0].video.uri;
      assert.ok(uri.startsWith(`${stub.url}/v1beta/files/`) && uri.endsWith(":download?alt=media"), uri);

      await assertVendorError(await vendorFetch("GET", uri, { key: null }), 401, "UNAUTHENTICATED");
      const download = await vendorFetch("GET", uri);
      assert.equal(download.status, 200);
      assert.equal(download.headers.get("content-type"), "video/mp4");
      const bytes = new Uint8Array(await download.arrayBuffer());
      const video = await probeMp4(bytes);
      assert.deepEqual({ width: video.width, height: video.height, durationSeconds: video.durationSeconds }, { width: 1280, height: 720, durationSeconds: 4 });
      assert.match(video.codec, /^avc1/);

      assert.deepEqual(stub.requests.map((r) => r.kind), ["predict", "poll", "poll", "poll", "download", "download"]);
      assert.deepEqual(stub.requests[0]!.body, { instances: [{ prompt: "a drone over a glacier" }], parameters: { durationSeconds: 4, resolution: "720p", aspectRatio: "16:9" } });
      assert.deepEqual(stub.requests[5]!.query, { alt: "media" });
    });

    test("9:16 videos are portrait", async () => {
      stub.videoPendingPolls = 0;
      const name = await startOperation({ durationSeconds: 2, aspectRatio: "9:16" });
      const done = await poll(name);
      const download = await vendorFetch("GET", done.response.generateVideoResponse.generatedSamples[0].video.uri);
      const video = await probeMp4(new Uint8Array(await download.arrayBuffer()));
      assert.deepEqual([video.width, video.height, video.durationSeconds], [720, 1280, 2]);
    });

    test("video-filtered: done with raiMediaFilteredCount 1 and no samples", async () => {
      stub.videoPendingPolls = 1;
      stub.fault({ kind: "video-filtered" }, { on: "predict", times: 1 });
      const name = await startOperation();
      assert.equal((await poll(name)).done, false);
      const done = await poll(name);
      assert.equal(done.done, true);
      assert.equal(done.error, undefined);
      assert.equal(done.response.generateVideoResponse.raiMediaFilteredCount, 1);
      assert.equal(done.response.generateVideoResponse.generatedSamples, undefined);
    });

    test("operation-error on a poll ends the operation at once with a google.rpc.Status", async () => {
      stub.videoPendingPolls = 5;
      const name = await startOperation();
      stub.fault({ kind: "operation-error", message: "boom" }, { on: "poll", times: 1 });
      assert.deepEqual(await poll(name), { name, done: true, error: { code: 13, message: "boom" } });
      assert.equal((await poll(name)).error.message, "boom", "stays failed");
    });

    test("rejects a duration out of 1..8 with 400 and an unknown operation with 404", async () => {
      const bad = await vendorFetch("POST", `models/${VIDEO_MODEL}:predictLongRunning`, { body: { instances: [{ prompt: "x" }], parameters: { durationSeconds: 9 } } });
      await assertVendorError(bad, 400, "INVALID_ARGUMENT");
      const noPrompt = await vendorFetch("POST", `models/${VIDEO_MODEL}:predictLongRunning`, { body: { instances: [{}] } });
      await assertVendorError(noPrompt, 400, "INVALID_ARGUMENT");
      await assertVendorError(await vendorFetch("GET", `models/${VIDEO_MODEL}/operations/ffffff`), 404, "NOT_FOUND");
    });

    test("poll and download obey switches scoped to them", async () => {
      stub.videoPendingPolls = 0;
      const name = await startOperation();
      stub.fault({ kind: "status", status: 503 }, { on: "poll", times: 1 });
      await assertVendorError(await vendorFetch("GET", name), 503, "UNAVAILABLE");
      const uri = (await poll(name)).response.generateVideoResponse.generatedSamples[0].video.uri;
      stub.fault({ kind: "malformed" }, { on: "download", times: 1 });
      const truncated = new Uint8Array(await (await vendorFetch("GET", uri)).arrayBuffer());
      await assert.rejects(probeMp4(truncated));
    });
  });

  describe("waiting helpers", () => {
    test("waitForClientClose rejects when the response completed normally", async () => {
      await (await generate(TEXT_MODEL, userTurn("a"))).text();
      await assert.rejects(stub.waitForClientClose(0), /was not closed by the client/);
    });

    test("waitForClientClose rejects at its deadline while the client keeps the connection", async () => {
      stub.fault({ kind: "stall" }, { times: 1 });
      const controller = new AbortController();
      const response = await generate(TEXT_MODEL, userTurn("a"), { signal: controller.signal });
      await assert.rejects(stub.waitForClientClose(0, { timeoutMs: 100 }), /timed out after 100 ms/);
      controller.abort();
      await response.text().catch(() => {});
      await stub.waitForClientClose(0);
    });
  });

  test("close() ends stalled connections and marks them as closed by the stub", async () => {
    const own = await startVendorStub();
    own.fault({ kind: "stall", afterChunks: 1 });
    const response = await fetch(`${own.url}/v1beta/models/${TEXT_MODEL}:streamGenerateContent?alt=sse`, {
      method: "POST",
      headers: { [VENDOR_KEY_HEADER]: own.apiKey },
      body: JSON.stringify(userTurn("a b c")),
    });
    const { reader } = await readEvents(response, 1);
    const rest = reader.read();
    await own.close();
    await assert.rejects(rest, TypeError);
    assert.deepEqual([own.requests[0]!.closedByStub, own.requests[0]!.clientClosed], [true, false]);
  });
});

describe("vendor response fixtures", () => {
  const dir = join(REPO_ROOT, "test", "fixtures", "vendor");
  const load = async (name: string) => JSON.parse(await readFile(join(dir, name), "utf8")) as Record<string, any>;

  test("every fixture listed by issue 4 is present and is JSON", async () => {
    const names = (await readdir(dir)).filter((n) => n.endsWith(".json")).sort();
    for (const required of [
      "blocked-prompt.json", "error-429.json", "image-inline.json", "mixed-text-image.json", "safety-finish.json", "text.json",
      "usage-modalities.json", "video-filtered.json", "video-operation-done.json", "video-operation-pending.json",
    ]) {
      assert.ok(names.includes(required), `${required} in ${names.join(", ")}`);
    }
    for (const name of names) await load(name);
  });

  test("generateContent fixtures carry usage whose totals add up and whose details sum to the counts", async () => {
    for (const name of ["text.json", "image-inline.json", "mixed-text-image.json", "usage-modalities.json", "blocked-prompt.json", "safety-finish.json"]) {
      const { usageMetadata: u, modelVersion, responseId } = await load(name);
      assert.ok(modelVersion && responseId, name);
      const candidates = u.candidatesTokenCount ?? 0;
      assert.equal(u.totalTokenCount, u.promptTokenCount + candidates + (u.thoughtsTokenCount ?? 0), name);
      const sum = (details?: { tokenCount: number }[]) => (details ?? []).reduce((s, d) => s + d.tokenCount, 0);
      if (u.candidatesTokensDetails) assert.equal(sum(u.candidatesTokensDetails), candidates, name);
      if (u.promptTokensDetails) assert.equal(sum(u.promptTokensDetails), u.promptTokenCount, name);
    }
  });

  test("image fixtures hold decodable PNGs, with the thought draft before the final image", async () => {
    const inline = await load("image-inline.json");
    const parts: Part[] = inline.candidates[0].content.parts;
    const images = parts.filter((p) => p.inlineData);
    assert.deepEqual(images.map((p) => Boolean(p.thought)), [true, false]);
    assert.ok(images[1]!.thoughtSignature);
    for (const image of images) probePng(Buffer.from(image.inlineData!.data, "base64"));
    assert.ok(parts.some((p) => p.text && !p.thought));

    const mixed = await load("mixed-text-image.json");
    const mixedParts: Part[] = mixed.candidates[0].content.parts;
    assert.deepEqual(mixedParts.map((p) => (p.inlineData ? "image" : "text")), ["text", "image", "text"]);
    probePng(Buffer.from(mixedParts[1]!.inlineData!.data, "base64"));
  });

  test("refusal and video fixtures have the shapes the adapter must recognise", async () => {
    const blocked = await load("blocked-prompt.json");
    assert.equal(blocked.promptFeedback.blockReason, "SAFETY");
    assert.equal(blocked.candidates, undefined);
    const safety = await load("safety-finish.json");
    assert.deepEqual(safety.candidates, [{ finishReason: "IMAGE_SAFETY", index: 0 }]);
    const omni = await load("usage-modalities.json");
    assert.deepEqual(omni.usageMetadata.candidatesTokensDetails.map((d: { modality: string }) => d.modality), ["TEXT", "VIDEO"]);

    const pending = await load("video-operation-pending.json");
    assert.ok(pending.name && !pending.done, "pending: done absent (proto3 JSON leaves out false)");
    const done = await load("video-operation-done.json");
    assert.match(done.response.generateVideoResponse.generatedSamples[0].video.uri, /:download\?alt=media$/);
    const filtered = await load("video-filtered.json");
    assert.equal(filtered.done, true);
    assert.equal(filtered.response.generateVideoResponse.raiMediaFilteredCount, 1);
    assert.equal(filtered.response.generateVideoResponse.generatedSamples, undefined);
    const rateLimited = await load("error-429.json");
    assert.equal(rateLimited.error.status, "RESOURCE_EXHAUSTED");
    assert.ok(rateLimited.error.details.some((d: Record<string, string>) => d["@type"] === "type.googleapis.com/google.rpc.RetryInfo" && /^\d+s$/.test(d.retryDelay!)));
  });
});
