// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";
import { balanceOf, createCustomer, pico, startTestService, type TestService } from "../support/harness.js";
import type { Failure, JourneyResult, Protocol, Target } from "./browser-client/gateway-client.js";
import { bundleClient, servePage, type PageServer } from "./page-server.js";

/**
 * Issue 9, "Browsers": a generated Connect-Web client (Connect and gRPC-Web
 * transports of @connectrpc/connect-web, the descriptors in gen/) in a real
 * Chromium, loaded from a page on one origin and calling the gateway port on
 * another: CORS_ORIGINS lists the first page's origin and not the second's.
 */

/** The system Chromium; CI installs it with `apt-get install -y chromium`. */
const CHROMIUM = "/usr/bin/chromium";

type GatewayClient = {
  journey(target: Target): Promise<JourneyResult>;
  balanceOrFailure(target: Target): Promise<{ available: string } | { failure: Failure }>;
  createFailure(target: Target): Promise<Failure | undefined>;
  restReplay(baseUrl: string, apiKey: string): Promise<{ statuses: number[]; replayed: string | null; location: string | null }>;
};

/** Calls one of the page's client functions (test/system/browser-client/gateway-client.ts). */
function inPage<K extends keyof GatewayClient>(page: Page, name: K, ...args: Parameters<GatewayClient[K]>): Promise<Awaited<ReturnType<GatewayClient[K]>>> {
  return page.evaluate(
    ([fn, fnArgs]) => ((globalThis as unknown as { gatewayClient: Record<string, (...a: unknown[]) => unknown> }).gatewayClient[fn]!(...fnArgs)),
    [name, args] as [string, unknown[]],
  ) as Promise<Awaited<ReturnType<GatewayClient[K]>>>;
}

const PROTOCOLS: readonly Protocol[] = ["connect", "grpc-web"];

describe("a Connect-Web client in Chromium against the gateway port", () => {
  let browser: Browser;
  let allowedPage: PageServer;
  let refusedPage: PageServer;
  let service: TestService;
  /** What the browser's console said: a CORS refusal is reported there, and only there, by the browser. */
  const console: string[] = [];

  before(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`the browser test needs Chromium at ${CHROMIUM}, and there is none: apt-get install -y chromium`);
    }
    const bundle = await bundleClient();
    allowedPage = await servePage(bundle);
    refusedPage = await servePage(bundle);
    service = await startTestService({ CORS_ORIGINS: allowedPage.origin });
    browser = await chromium.launch({ executablePath: CHROMIUM });
  });
  after(async () => {
    await browser?.close();
    await service?.close();
    await allowedPage?.close();
    await refusedPage?.close();
  });

  /** A fresh page of `origin`, its client loaded. */
  async function open(origin: string): Promise<Page> {
    const page = await browser.newPage();
    page.on("console", (message) => console.push(message.text()));
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => "gatewayClient" in globalThis);
    return page;
  }

  for (const protocol of PROTOCOLS) {
    it(`when the page of a listed origin uses the ${protocol} transport, then it reads the balance, creates a job, polls it until done and streams text`, async () => {
      const customer = await createCustomer(service, "10.00");
      const page = await open(allowedPage.origin);
      try {
        const result = await inPage(page, "journey", { baseUrl: service.url, protocol, apiKey: customer.apiKey });
        assert.equal(result.balance, "10.00");
        assert.match(result.jobId, /^[0-9a-f-]{36}$/);
        assert.equal(result.replayed, true, "the same idempotency key replays the job");
        assert.equal(result.finalStatus, "DONE", JSON.stringify(result));
        assert.match(result.imageUrl, /\/files\/.+\?expires=\d+&signature=/);
        assert.ok(result.streamedMessages > 1, `a stream of chunks, got ${result.streamedMessages}`);
        assert.ok(result.streamedText.length > 0);
        // One image and one text call were charged, and the page saw the same balance the REST surface reports.
        const after = await balanceOf(service, customer.apiKey);
        assert.equal(after.available, result.balanceAfter);
        assert.ok(pico(after.available) < pico("10.00"));
      } finally {
        await page.close();
      }
    });

    it(`when the page's ${protocol} call has a wrong key, then the client gets UNAUTHENTICATED with the service's message and ErrorDetail`, async () => {
      const page = await open(allowedPage.origin);
      try {
        const answer = await inPage(page, "balanceOrFailure", { baseUrl: service.url, protocol, apiKey: "sk_wrong" });
        assert.ok("failure" in answer, JSON.stringify(answer));
        assert.deepEqual(answer.failure, {
          code: "Unauthenticated", message: "the API key is invalid or revoked", reason: "invalid_api_key", httpStatus: 401,
        });
      } finally {
        await page.close();
      }
    });

    it(`when a page of an origin not listed makes a ${protocol} call, then the browser refuses it (CORS) and nothing reaches the service`, async () => {
      const customer = await createCustomer(service, "10.00");
      const page = await open(refusedPage.origin);
      try {
        const seen = console.length;
        const target = { baseUrl: service.url, protocol, apiKey: customer.apiKey };
        const balance = await inPage(page, "balanceOrFailure", target);
        assert.ok("failure" in balance, `the call must fail: ${JSON.stringify(balance)}`);
        assert.notEqual(balance.failure.code, "Unauthenticated", "no answer of the service reached the page");
        assert.equal(balance.failure.reason, undefined);
        const created = await inPage(page, "createFailure", target);
        assert.ok(created, "CreateGeneration must fail");
        assert.ok(
          console.slice(seen).some((line) => line.includes(refusedPage.origin) && /blocked by CORS policy/.test(line)),
          `Chromium reports the CORS refusal: ${console.slice(seen).join(" | ")}`,
        );
        // The preflight was refused, so the POST was never sent: nothing reserved, nothing charged.
        assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });

        // The same page's origin, listed, would have been served: the refusal is the origin's, not the call's.
        const allowed = await open(allowedPage.origin);
        try {
          assert.deepEqual(await inPage(allowed, "balanceOrFailure", target), { available: "10.00" });
        } finally {
          await allowed.close();
        }
      } finally {
        await page.close();
      }
    });
  }

  it("when the page of a listed origin uses the REST surface, then it can read Idempotent-Replayed and Location of the answer", async () => {
    const customer = await createCustomer(service, "10.00");
    const page = await open(allowedPage.origin);
    try {
      const answer = await inPage(page, "restReplay", service.url, customer.apiKey);
      assert.deepEqual(answer.statuses, [202, 202]);
      assert.equal(answer.replayed, "true");
      assert.match(answer.location ?? "", /^\/api\/v1\/jobs\/[0-9a-f-]{36}$/);
    } finally {
      await page.close();
    }
  });
});
