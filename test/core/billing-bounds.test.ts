// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig, type Config } from "../../src/config/config.js";
import { startService } from "../../src/runtime/start-service.js";
import {
  ADMIN_TOKEN, BACKEND, balanceOf, call, createCustomer, dropRealBackend, eventually, finishedJob, pico, realBackendEnv, type TestService,
} from "../support/harness.js";
import { postGeneration, tinyPng } from "../support/jobs-api-helpers.js";
import { assertVendorError, perMillion, streamRequest, tokensOf, userTurn, VENDOR } from "../support/vendor-helpers.js";
import { startVendorStub, stubAnswer, THOUGHTS_TOKENS, type VendorStub } from "../support/vendor-stub.js";
import { money } from "../support/billing-helpers.js";
import { captureLog, type LogLine } from "../support/capture-log.js";

/*
 * Issue 8, "Billing bounds", through the real HTTP surfaces, the real core,
 * the real ledger (SQLite, or Cassandra with TEST_BACKEND=real) and the vendor
 * stub as the upstream:
 *  - a reservation covers what the request can cost: inline media by the
 *    vendor's token rules (from the image's real dimensions), plus
 *    maxOutputTokens × output price; the upstream is held to that
 *    maxOutputTokens (synchronous text API and text jobs alike);
 *  - usage beyond the hold is charged only as far as the balance allows: the
 *    balance never goes negative and the shortfall is recorded and logged once;
 *  - the synchronous text API passes only allow-listed fields upstream.
 * The oracle is the published prices (src/config/default-prices.json) and the
 * token rules of docs/money.md, computed here independently.
 * What is held during a call is read while the test holds that call's
 * upstream request (startHoldingUpstream), never after a delay.
 */

const PRO = { model: "aimodel-3.1-pro-preview", input: "2.00", output: "12.00" };
const FLASH = { model: "aimodel-3.5-flash", input: "0.30", output: "2.50" };
const MODEL_MAX_OUTPUT_TOKENS = 8192;

/** docs/money.md "Billing bounds": the larger of 258 per started 768×768 tile (258 for ≤384×384) and 2240 per image. */
function imageTokens(width: number, height: number): number {
  const tiles = width <= 384 && height <= 384 ? 1 : Math.ceil(width / 768) * Math.ceil(height / 768);
  return Math.max(258 * tiles, 2240);
}

const reservationOf = (prices: { input: string; output: string }, promptTokens: number, maxOutputTokens: number) =>
  perMillion(prices.input, promptTokens) + perMillion(prices.output, maxOutputTokens);

interface Started extends TestService {
  /** Everything the service logged for the operator (deps.log). */
  readonly logged: LogLine[];
}

/** The whole service as the harness starts it, with its operator log captured. */
async function startLoggedService(env: Record<string, string>): Promise<Started> {
  const dataDir = await mkdtemp(join(tmpdir(), "billing-bounds-"));
  const backendEnv = BACKEND === "real" ? realBackendEnv() : {};
  const config: Config = loadConfig({
    HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir, LOG_LEVEL: "silent",
    ALLOW_PRIVATE_URLS: "true", SHUTDOWN_GRACE: "200ms", REAPER_INTERVAL: "500ms", DRAIN_DELAY: "0ms",
    ...backendEnv,
    ...env,
  });
  const log = captureLog("info");
  const logged = log.lines;
  const running = await startService(config, { logger: log.logger });
  return {
    url: running.httpUrl,
    dataDir,
    grpcUrl: running.grpcUrl ?? "",
    running,
    logged,
    async close() {
      await running.close();
      await rm(dataDir, { recursive: true, force: true });
      if (BACKEND === "real") await dropRealBackend(backendEnv);
    },
  };
}

/** A request to the upstream held until the test releases it. */
interface HeldCall {
  /** Resolves when the held request has arrived (the service is mid-call, its hold taken). */
  readonly reached: Promise<void>;
  release(): void;
}

interface HoldingUpstream {
  readonly url: string;
  /** Holds the next request for `model` before it reaches the stub, until `release()`. */
  holdNext(model: string): HeldCall;
  close(): Promise<void>;
}

/**
 * The upstream as the service sees it: a pass-through to the vendor stub that
 * can hold a request until the test releases it, so what the service holds
 * while a call runs is read while the call is certainly running (no delay
 * that a slow machine could outlast).
 */
async function startHoldingUpstream(target: string): Promise<HoldingUpstream> {
  const origin = new URL(target);
  const armed = new Map<string, { arrived: () => void; released: Promise<void> }>();
  const releases = new Set<() => void>();
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const model = /\/models\/([^/:]+)/.exec(req.url ?? "")?.[1];
    const hold = model === undefined ? undefined : armed.get(decodeURIComponent(model));
    if (hold) {
      armed.delete(decodeURIComponent(model!));
      hold.arrived();
      await hold.released;
    }
    const upstream = httpRequest(
      { host: origin.hostname, port: origin.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    res.on("close", () => upstream.destroy());
    upstream.end(Buffer.concat(chunks));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    holdNext(model) {
      let arrived!: () => void;
      let release!: () => void;
      const reached = new Promise<void>((resolve) => (arrived = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      releases.add(release);
      armed.set(model, { arrived, released });
      return { reached, release };
    },
    async close() {
      for (const release of releases) release();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

const generate = (service: TestService, model: string, key: string, body: unknown) =>
  call(service, "POST", `${VENDOR}/models/${model}:generateContent`, { vendorKey: key, body });

/** What the account holds while its upstream call is held (then lets the call go on). */
async function heldWhileRunning(service: TestService, key: string, call: HeldCall, timeoutMs = 20_000): Promise<bigint> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      call.reached,
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no upstream call arrived within ${timeoutMs} ms`)), timeoutMs))),
    ]);
    return pico((await balanceOf(service, key)).reserved);
  } finally {
    clearTimeout(timer);
    call.release();
  }
}

const pngPart = (png: Buffer) => ({ inlineData: { mimeType: "image/png", data: png.toString("base64") } });

describe(`billing bounds (${BACKEND} backend, vendor stub upstream)`, () => {
  let stub: VendorStub;
  let holding: HoldingUpstream;
  let service: Started;
  before(async () => {
    stub = await startVendorStub();
    holding = await startHoldingUpstream(stub.url);
    service = await startLoggedService({ VENDOR_BASE_URL: holding.url, VENDOR_API_KEY: stub.apiKey, UPSTREAM_POLL_INTERVAL: "50ms" });
  });
  after(async () => {
    await service?.close();
    await holding?.close();
    await stub?.close();
  });

  describe("a balance never goes negative", () => {
    it("when the upstream reports usage above the hold, then the charge stops at hold + available, the balance ends at 0 and the shortfall is recorded and logged once", async () => {
      const prompt = "Why is the sea salty?";
      const maxOutputTokens = 2;
      // The stub's thinking model reports 200 thought tokens beyond maxOutputTokens: more than the hold.
      const hold = reservationOf(PRO, tokensOf(prompt), maxOutputTokens);
      const customer = await createCustomer(service, money(hold), ["*"]);
      const mark = stub.requests.length;
      const logsBefore = service.logged.length;

      const response = await generate(service, PRO.model, customer.apiKey, userTurn(prompt, { generationConfig: { maxOutputTokens } }));
      assert.equal(response.status, 200, response.text);

      const upstream = stub.requests.slice(mark).filter((r) => r.model === PRO.model);
      assert.equal(upstream.length, 1);
      assert.equal((upstream[0]!.body as any).generationConfig.maxOutputTokens, maxOutputTokens, "the upstream is held to the reserved bound");
      const usage = upstream[0]!.lastUsage!;
      assert.equal(usage.thoughtsTokenCount, THOUGHTS_TOKENS);
      const cost = perMillion(PRO.input, usage.promptTokenCount) + perMillion(PRO.output, (usage.candidatesTokenCount ?? 0) + THOUGHTS_TOKENS);
      assert.ok(cost > hold, `the usage (${money(cost)}) exceeds the hold (${money(hold)})`);

      const after = await eventually(() => balanceOf(service, customer.apiKey), (b) => b.reserved === "0.00", { what: "the hold to end" });
      assert.equal(pico(after.balance), 0n, `charged hold + available and no more: ${JSON.stringify(after)}`);
      assert.equal(pico(after.available), 0n);

      const ledger = service.running.core!.deps.ledger;
      const shortfalls = await ledger.shortfalls(customer.accountId);
      assert.equal(shortfalls.length, 1, JSON.stringify(shortfalls, (_k, v) => (typeof v === "bigint" ? v.toString() : v)));
      assert.equal(shortfalls[0]!.amount, cost - hold, "the amount not charged is recorded for the operator");
      const reports = service.logged.slice(logsBefore).map((line) => JSON.stringify(line)).filter((m) => m.includes("shortfall") && m.includes(customer.accountId));
      assert.equal(reports.length, 1, `logged once: ${JSON.stringify(service.logged.slice(logsBefore))}`);
      assert.match(reports[0]!, new RegExp(`${money(cost - hold).replace(".", "\\.")} not charged`));
    });

    it("when a streamed answer's usage exceeds the hold, then the balance also ends at 0, never below", async () => {
      const prompt = "Tell me slowly about a harbour, the gulls, the boats, the tides and the old stone pier";
      const maxOutputTokens = 3;
      const hold = reservationOf(PRO, tokensOf(prompt), maxOutputTokens);
      const customer = await createCustomer(service, money(hold), ["*"]);
      const response = await streamRequest(service, PRO.model, userTurn(prompt, { generationConfig: { maxOutputTokens } }), { key: customer.apiKey });
      assert.equal(response.status, 200);
      await response.text();
      const after = await eventually(() => balanceOf(service, customer.apiKey), (b) => b.reserved === "0.00", { what: "the hold to end" });
      assert.equal(pico(after.balance), 0n, JSON.stringify(after));
      const shortfalls = await service.running.core!.deps.ledger.shortfalls(customer.accountId);
      assert.equal(shortfalls.length, 1);
      assert.ok(shortfalls[0]!.amount > 0n);
    });
  });

  describe("what is reserved, and what the upstream is held to", () => {
    it("when a synchronous request carries inline images, then each is reserved by the vendor's rules from its real dimensions, plus maxOutputTokens × output price", async () => {
      const prompt = "Compare these two pictures";
      const large = tinyPng(3100, 800); // 5 × 2 tiles: 2580 tokens
      const small = tinyPng(8, 8); // one small image: the per-image ceiling, 2240
      const maxOutputTokens = 100;
      const customer = await createCustomer(service, "10.00", ["*"]);
      const call = holding.holdNext(FLASH.model);
      const mark = stub.requests.length;
      const pending = generate(service, FLASH.model, customer.apiKey, {
        contents: [{ role: "user", parts: [{ text: prompt }, pngPart(large), pngPart(small)] }],
        generationConfig: { maxOutputTokens },
      });
      const held = await heldWhileRunning(service, customer.apiKey, call);
      const response = await pending;
      assert.equal(response.status, 200, response.text);
      assert.equal(imageTokens(3100, 800), 2580);
      assert.equal(held, reservationOf(FLASH, tokensOf(prompt) + imageTokens(3100, 800) + imageTokens(8, 8), maxOutputTokens),
        `held ${money(held)}`);
      const upstream = stub.requests.slice(mark).find((r) => r.model === FLASH.model)!;
      assert.equal((upstream.body as any).generationConfig.maxOutputTokens, maxOutputTokens);
    });

    it("when a synchronous request names no maxOutputTokens, then the model's maximum is reserved and sent upstream", async () => {
      const prompt = "Say hello";
      const customer = await createCustomer(service, "10.00", ["*"]);
      const call = holding.holdNext(FLASH.model);
      const mark = stub.requests.length;
      const pending = generate(service, FLASH.model, customer.apiKey, userTurn(prompt));
      const held = await heldWhileRunning(service, customer.apiKey, call);
      const response = await pending;
      assert.equal(response.status, 200, response.text);
      assert.equal(held, reservationOf(FLASH, tokensOf(prompt), MODEL_MAX_OUTPUT_TOKENS));
      const upstream = stub.requests.slice(mark).find((r) => r.model === FLASH.model)!;
      assert.equal((upstream.body as any).generationConfig.maxOutputTokens, MODEL_MAX_OUTPUT_TOKENS);
    });

    it("when a text job carries an inline image, then it is reserved from the image's dimensions and the upstream is held to the reserved output bound", async () => {
      const prompt = "Describe the picture";
      const image = tinyPng(3100, 800);
      const customer = await createCustomer(service, "10.00", ["*"]);
      const call = holding.holdNext(FLASH.model);
      const mark = stub.requests.length;
      const created = await postGeneration(service, customer.apiKey, {
        model: FLASH.model, prompt, input_images_base64: [image.toString("base64")],
      });
      assert.equal(created.status, 202, created.text);
      const held = await heldWhileRunning(service, customer.apiKey, call);
      const job = await finishedJob(service, customer.apiKey, created.json.job_id);
      assert.equal(job.status, "done", JSON.stringify(job));
      assert.equal(held, reservationOf(FLASH, tokensOf(prompt) + imageTokens(3100, 800), MODEL_MAX_OUTPUT_TOKENS), `held ${money(held)}`);
      assert.equal(pico(job.usage.reserved), held);
      const upstream = stub.requests.slice(mark).find((r) => r.model === FLASH.model)!;
      assert.equal((upstream.body as any).generationConfig.maxOutputTokens, MODEL_MAX_OUTPUT_TOKENS, "the upstream is held to what was reserved");
      assert.equal(job.result.text, stubAnswer(prompt));
    });
  });

  describe("the synchronous text API passes only what is priced", () => {
    const refused: { name: string; extra: Record<string, unknown>; field: string }[] = [
      { name: "a built-in tool (search)", extra: { tools: [{ googleSearch: {} }] }, field: "tools[0].googleSearch" },
      { name: "a built-in tool (code execution)", extra: { tools: [{ functionDeclarations: [{ name: "f" }] }, { codeExecution: {} }] }, field: "tools[1].codeExecution" },
      { name: "a retrieval toolConfig", extra: { toolConfig: { retrievalConfig: { languageCode: "en" } } }, field: "toolConfig.retrievalConfig" },
      { name: "an unknown safety threshold", extra: { safetySettings: [{ category: "HARM_CATEGORY_HARASSMENT", threshold: "BLOCK_SOME" }] }, field: "safetySettings[0].threshold" },
      { name: "cachedContent", extra: { cachedContent: "cachedContents/operator-cache-1" }, field: "context caching is not offered" },
      { name: "snake_case cached_content", extra: { cached_content: "cachedContents/operator-cache-1" }, field: "cachedContent" },
      { name: "an output modality it does not price", extra: { generationConfig: { responseModalities: ["AUDIO"] } }, field: "generationConfig.responseModalities" },
      {
        name: "a thinking budget beyond the model's largest",
        extra: { generationConfig: { maxOutputTokens: 50, thinkingConfig: { thinkingBudget: 24_577 } } },
        field: "generationConfig.thinkingConfig.thinkingBudget",
      },
    ];
    for (const { name, extra, field } of refused) {
      it(`when a request carries ${name}, then it is refused with 400 in the vendor's shape naming ${field}, nothing goes upstream and nothing is held`, async () => {
        const customer = await createCustomer(service, "10.00", ["*"]);
        const mark = stub.requests.length;
        const response = await generate(service, FLASH.model, customer.apiKey, userTurn("Find today's news", extra));
        assertVendorError(response, 400, "INVALID_ARGUMENT");
        const info = response.json.error.details.find((d: { "@type"?: string }) => d["@type"] === "type.googleapis.com/google.rpc.ErrorInfo");
        assert.equal(info.reason, "UNSUPPORTED_FIELD");
        assert.ok(response.json.error.message.includes(field), `the message names ${field}: ${response.json.error.message}`);
        assert.equal(stub.requests.slice(mark).filter((r) => r.model === FLASH.model).length, 0, "nothing reached the upstream");
        assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
      });
    }

    it("when a request carries inline data of a type the reservation cannot bound (PDF), then it is refused with 400 unsupported_media_type", async () => {
      const customer = await createCustomer(service, "10.00", ["*"]);
      const response = await generate(service, FLASH.model, customer.apiKey, {
        contents: [{ role: "user", parts: [{ text: "Summarise" }, { inlineData: { mimeType: "application/pdf", data: Buffer.from("%PDF-1.7").toString("base64") } }] }],
      });
      assertVendorError(response, 400, "INVALID_ARGUMENT");
      assert.match(response.json.error.message, /contents\[0\]\.parts\[1\]\.inlineData\.mimeType/);
    });

    it("when a request carries only allowed fields, then exactly those reach the upstream", async () => {
      const customer = await createCustomer(service, "10.00", ["*"]);
      const mark = stub.requests.length;
      const body = {
        systemInstruction: { parts: [{ text: "Answer briefly." }] },
        contents: [{ role: "user", parts: [{ text: "Name a colour" }] }],
        generationConfig: { temperature: 0.5, topK: 3, stopSequences: ["END"], responseMimeType: "text/plain", maxOutputTokens: 64 },
        unknownField: { ignored: true },
      };
      const response = await generate(service, FLASH.model, customer.apiKey, body);
      assert.equal(response.status, 200, response.text);
      const sent = stub.requests.slice(mark).find((r) => r.model === FLASH.model)!.body as Record<string, any>;
      assert.deepEqual(Object.keys(sent).sort(), ["contents", "generationConfig", "systemInstruction"]);
      assert.deepEqual(sent.generationConfig, { temperature: 0.5, topK: 3, stopSequences: ["END"], responseMimeType: "text/plain", maxOutputTokens: 64 });
    });
  });
});
