// backends: embedded
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createCustomer, finishedJob, startTestService, type TestService } from "../support/harness.js";
import { download, postGeneration } from "../support/jobs-api-helpers.js";
import { probeMp4 } from "../support/media-probe.js";
import { startVendorStub, VENDOR_KEY_HEADER, type VendorStub } from "../support/vendor-stub.js";

/*
 * The upstream video download: the vendor's key goes to the route's own
 * origin only, redirects are followed only within the link's origin (a few
 * hops), a foreign link is fetched without the key and through the address
 * guard, and the file is bounded by UPSTREAM_VIDEO_MAX_BYTES.
 *
 * The route's origin is a thin front that passes every call to the vendor
 * stub (its real wire format) and points the operation's video links at
 * itself, as a vendor's own edge would; a test can make its download answer
 * a redirect or an oversized file instead. A second loopback server is the
 * foreign origin: it records whatever reaches it, and serves the stub's MP4
 * (fetched with its own credentials, like a CDN) or an oversized file.
 */

const VIDEO = "videomodel-3.1-generate-001";
const MAX_VIDEO_BYTES = 1024 * 1024;
const OVERSIZED = Buffer.alloc(2 * MAX_VIDEO_BYTES, 1);

interface Seen {
  readonly path: string;
  readonly key: string | undefined;
}

interface Origin {
  readonly url: string;
  readonly seen: Seen[];
  close(): Promise<void>;
}

async function listen(handler: (request: IncomingMessage, response: ServerResponse, url: URL) => void | Promise<void>): Promise<Origin> {
  const seen: Seen[] = [];
  let base = "";
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? "/", base);
    seen.push({ path: `${url.pathname}${url.search}`, key: request.headers[VENDOR_KEY_HEADER] as string | undefined });
    Promise.resolve(handler(request, response, url)).catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(500).end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    seen,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

async function bodyOf(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Passes a call on to the stub; JSON answers get their video links pointed at `linkOrigin`. */
async function relay(stub: VendorStub, request: IncomingMessage, response: ServerResponse, url: URL, key: string | undefined, linkOrigin?: string) {
  const body = await bodyOf(request);
  const headers: Record<string, string> = {};
  if (key) headers[VENDOR_KEY_HEADER] = key;
  if (request.headers["content-type"]) headers["content-type"] = request.headers["content-type"];
  const answer = await fetch(`${stub.url}${url.pathname}${url.search}`, { method: request.method, headers, body: body.length ? body : undefined });
  const type = answer.headers.get("content-type") ?? "application/octet-stream";
  let bytes = Buffer.from(await answer.arrayBuffer());
  if (linkOrigin && type.includes("json")) bytes = Buffer.from(bytes.toString("utf8").replaceAll(stub.url, linkOrigin));
  response.writeHead(answer.status, { "content-type": type, "content-length": bytes.length }).end(bytes);
}

function oversized(response: ServerResponse, declareLength: boolean) {
  response.writeHead(200, { "content-type": "video/mp4", ...(declareLength ? { "content-length": OVERSIZED.length } : {}) });
  response.end(OVERSIZED);
}

type DownloadOverride = (response: ServerResponse, url: URL) => void;

describe("upstream video download: key, redirects and size (UPSTREAM_VIDEO_MAX_BYTES=1MiB)", () => {
  let stub: VendorStub;
  let front: Origin;
  let foreign: Origin;
  let service: TestService;
  /** Where the operation's video links point (the front by default). */
  let linkOrigin: () => string;
  let overrideDownload: DownloadOverride | undefined;
  let foreignServesOversized = false;

  before(async () => {
    stub = await startVendorStub();
    foreign = await listen((request, response, url) => {
      if (foreignServesOversized) return oversized(response, true);
      return relay(stub, request, response, url, stub.apiKey);
    });
    front = await listen((request, response, url) => {
      if (overrideDownload && url.pathname.endsWith(":download") && !url.searchParams.has("moved")) return overrideDownload(response, url);
      return relay(stub, request, response, url, request.headers[VENDOR_KEY_HEADER] as string | undefined, linkOrigin());
    });
    linkOrigin = () => front.url;
    service = await startTestService({
      VENDOR_BASE_URL: front.url, VENDOR_API_KEY: stub.apiKey, UPSTREAM_POLL_INTERVAL: "50ms", UPSTREAM_VIDEO_MAX_BYTES: "1MiB",
    });
  });
  afterEach(() => {
    linkOrigin = () => front.url;
    overrideDownload = undefined;
    foreignServesOversized = false;
  });
  after(async () => {
    await service?.close();
    await front?.close();
    await foreign?.close();
    await stub?.close();
  });

  async function videoJob(prompt: string) {
    const customer = await createCustomer(service);
    const frontMark = front.seen.length;
    const foreignMark = foreign.seen.length;
    const created = await postGeneration(service, customer.apiKey, { model: VIDEO, prompt, resolution: "720p", duration_seconds: 4 });
    assert.equal(created.status, 202, created.text);
    const job = await finishedJob(service, customer.apiKey, created.json.job_id);
    return { job, atFront: front.seen.slice(frontMark), atForeign: foreign.seen.slice(foreignMark) };
  }

  /** No address, port or URL of either origin in a job's message. */
  function assertNothingInternal(message: string) {
    for (const origin of [front.url, foreign.url, stub.url]) {
      const { host, port } = new URL(origin);
      for (const fact of [host, port, "127.0.0.1", "http://", ":download"]) assert.ok(!message.includes(fact), `"${message}" reveals "${fact}"`);
    }
  }

  it("when the video link is on the route's origin, then it is downloaded there with the key and the job is done", async () => {
    const { job, atFront, atForeign } = await videoJob("waves on a pebble beach");
    assert.equal(job.status, "done", JSON.stringify(job));
    const probe = await probeMp4((await download(job.result.image_url)).bytes);
    assert.deepEqual({ width: probe.width, height: probe.height }, { width: 1280, height: 720 });
    const downloads = atFront.filter((s) => s.path.includes(":download"));
    assert.equal(downloads.length, 1);
    assert.ok(atFront.every((s) => s.key === stub.apiKey), JSON.stringify(atFront));
    assert.deepEqual(atForeign, []);
  });

  it("when the vendor's download redirects within its own origin, then the redirect is followed with the key and the job is done", async () => {
    overrideDownload = (response, url) => {
      response.writeHead(302, { location: `${url.pathname}?alt=media&moved=1` }).end();
    };
    const { job, atFront } = await videoJob("a lighthouse at dusk");
    assert.equal(job.status, "done", JSON.stringify(job));
    const downloads = atFront.filter((s) => s.path.includes(":download"));
    assert.equal(downloads.length, 2, JSON.stringify(downloads));
    assert.ok(downloads[1]!.path.includes("moved=1"));
    assert.ok(downloads.every((s) => s.key === stub.apiKey));
  });

  it("when the vendor's download redirects to another origin, then the job fails with upstream_rejected and that origin sees neither the key nor any request", async () => {
    overrideDownload = (response) => {
      response.writeHead(302, { location: `${foreign.url}/v1beta/files/elsewhere:download?alt=media` }).end();
    };
    const { job, atForeign } = await videoJob("a kite over the dunes");
    assert.equal(job.status, "failed", JSON.stringify(job));
    assert.equal(job.error, "upstream_rejected");
    assert.equal(job.error_message, "the upstream video could not be downloaded: it redirected to another origin, which is not followed");
    assertNothingInternal(job.error_message);
    assert.deepEqual(atForeign, []);
    assert.equal(job.usage.charged, "0.00");
  });

  it("when the vendor's download keeps redirecting within its origin, then it gives up after 5 hops", async () => {
    overrideDownload = (response, url) => {
      const hop = Number(url.searchParams.get("hop") ?? 0) + 1;
      response.writeHead(307, { location: `${url.pathname}?alt=media&hop=${hop}` }).end();
    };
    const { job, atFront } = await videoJob("a staircase without end");
    assert.equal(job.status, "failed", JSON.stringify(job));
    assert.equal(job.error, "upstream_rejected");
    assert.equal(job.error_message, "the upstream video could not be downloaded: it redirected more than 5 times");
    assert.equal(atFront.filter((s) => s.path.includes(":download")).length, 6);
  });

  it("when the video link is on another origin, then it is fetched there without the key", async () => {
    linkOrigin = () => foreign.url;
    const { job, atFront, atForeign } = await videoJob("gulls over the harbour");
    assert.equal(job.status, "done", JSON.stringify(job));
    assert.equal(atFront.filter((s) => s.path.includes(":download")).length, 0);
    assert.equal(atForeign.length, 1, JSON.stringify(atForeign));
    assert.equal(atForeign[0]!.key, undefined, "the foreign origin got the vendor's key");
    const probe = await probeMp4((await download(job.result.image_url)).bytes);
    assert.ok(Math.abs(probe.durationSeconds - 4) < 0.05);
  });

  it("when the route's own file is larger than the cap (sent without a length), then the job fails with a public message", async () => {
    overrideDownload = (response) => oversized(response, false);
    const { job } = await videoJob("an endless river");
    assert.equal(job.status, "failed", JSON.stringify(job));
    assert.equal(job.error, "upstream_rejected");
    assert.equal(job.error_message, `the upstream video could not be downloaded: larger than the ${MAX_VIDEO_BYTES}-byte limit`);
    assertNothingInternal(job.error_message);
    assert.equal(job.usage.charged, "0.00");
  });

  it("when a foreign file declares a length above the cap, then the job fails with the same public message", async () => {
    linkOrigin = () => foreign.url;
    foreignServesOversized = true;
    const { job } = await videoJob("an endless desert");
    assert.equal(job.status, "failed", JSON.stringify(job));
    assert.equal(job.error, "upstream_rejected");
    assert.equal(job.error_message, `the upstream video could not be downloaded: larger than the ${MAX_VIDEO_BYTES}-byte limit`);
  });
});

describe("upstream video download: a foreign link to a private address (ALLOW_PRIVATE_URLS=false)", () => {
  let stub: VendorStub;
  let front: Origin;
  let foreign: Origin;
  let service: TestService;
  before(async () => {
    stub = await startVendorStub();
    foreign = await listen((request, response, url) => relay(stub, request, response, url, stub.apiKey));
    front = await listen((request, response, url) => relay(stub, request, response, url, request.headers[VENDOR_KEY_HEADER] as string | undefined, foreign.url));
    service = await startTestService({
      VENDOR_BASE_URL: front.url, VENDOR_API_KEY: stub.apiKey, UPSTREAM_POLL_INTERVAL: "50ms", ALLOW_PRIVATE_URLS: "false",
    });
  });
  after(async () => {
    await service?.close();
    await front?.close();
    await foreign?.close();
    await stub?.close();
  });

  it("when the operation links to a loopback address off the route's origin, then the job fails without fetching it (the route's own loopback origin is still used)", async () => {
    const customer = await createCustomer(service);
    const created = await postGeneration(service, customer.apiKey, { model: VIDEO, prompt: "a quiet street", resolution: "720p", duration_seconds: 4 });
    assert.equal(created.status, 202, created.text);
    const job = await finishedJob(service, customer.apiKey, created.json.job_id);
    assert.equal(job.status, "failed", JSON.stringify(job));
    assert.equal(job.error, "upstream_rejected");
    assert.equal(job.error_message, "the upstream video could not be downloaded: the address is not allowed");
    assert.deepEqual(foreign.seen, []);
    assert.ok(front.seen.some((s) => s.path.includes(":predictLongRunning")), "the route's own origin was used");
  });
});
