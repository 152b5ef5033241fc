// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createCustomer, finishedJob, type TestService, startTestService } from "../support/harness.js";
import { assertBalance, closedPortUrl, FRESH_BALANCE, postGeneration, startLocalServer, tinyPng, type LocalServer } from "../support/jobs-api-helpers.js";

/*
 * A job whose input image URL cannot be fetched fails with
 * missing_input_images and an error_message in public terms only: which image
 * (its 1-based position in input_images_urls, never the URL, which may carry
 * credentials) and why (address not allowed, refused, timeout, HTTP status,
 * size), never an internal address, port, resolution result or system error.
 */

const PNG = tinyPng(8, 8);
const BIG = Buffer.alloc(100 * 1024, 7);
const MAX_INPUT_BYTES = 64 * 1024;

async function startImageServer(): Promise<LocalServer> {
  return startLocalServer((request, response) => {
    const path = (request.url ?? "").replace(/\?.*/, "");
    if (path === "/ok.png") {
      response.writeHead(200, { "content-type": "image/png", "content-length": PNG.length }).end(PNG);
    } else if (path === "/big.png") {
      response.writeHead(200, { "content-type": "image/png", "content-length": BIG.length }).end(BIG);
    } else if (path === "/big-chunked.png") {
      response.writeHead(200, { "content-type": "image/png" });
      response.write(BIG.subarray(0, BIG.length / 2));
      response.end(BIG.subarray(BIG.length / 2));
    } else if (path === "/slow.png") {
      // Never answers: the fetch must give up on its own.
    } else if (path === "/moved.png") {
      response.writeHead(302, { location: "/ok.png" }).end();
    } else {
      response.writeHead(404, { "content-type": "text/plain" }).end("not here");
    }
  });
}

const imageBody = (urls: string[]) => ({
  model: "aimodel-3-pro-image", prompt: "a red fox in snow", aspect_ratio: "1:1", resolution: "1K", input_images_urls: urls,
});

async function failedJob(service: TestService, urls: string[]) {
  const customer = await createCustomer(service);
  const created = await postGeneration(service, customer.apiKey, imageBody(urls));
  assert.equal(created.status, 202, created.text);
  const job = await finishedJob(service, customer.apiKey, created.json.job_id);
  assert.equal(job.status, "failed", JSON.stringify(job));
  assert.equal(job.error, "missing_input_images");
  await assertBalance(service, customer.apiKey, FRESH_BALANCE);
  return job;
}

/** The message says exactly `expected` and none of the internal facts. */
function assertPublicMessage(message: string, expected: string, urls: string[]) {
  assert.equal(message, expected);
  const internals = ["127.0.0.1", "::1", "localhost", "ECONN", "EAI_", "ENOTFOUND", "resolves", "http://", "https://"];
  for (const url of urls) {
    const parsed = new URL(url);
    internals.push(parsed.host, parsed.port, parsed.pathname);
    if (parsed.username) internals.push(parsed.username, parsed.password);
    if (parsed.search) internals.push(parsed.search.slice(1));
  }
  for (const fact of internals.filter((f) => f && f !== "/")) assert.ok(!message.includes(fact), `"${message}" reveals "${fact}"`);
}

describe("input image fetch failures in public terms (ALLOW_PRIVATE_URLS=false)", () => {
  let service: TestService;
  let images: LocalServer;
  let port: string;
  before(async () => {
    service = await startTestService({ ALLOW_PRIVATE_URLS: "false" });
    images = await startImageServer();
    port = new URL(images.url).port;
  });
  after(async () => {
    await images.close();
    await service.close();
  });

  it("when an input URL names a loopback address, then the job says the address is not allowed and nothing is fetched", async () => {
    const urls = [`${images.url}/ok.png`];
    const job = await failedJob(service, urls);
    assertPublicMessage(job.error_message, "input image 1 could not be fetched: the address is not allowed", urls);
    assert.deepEqual(images.hits, []);
  });

  it("when an input URL's name resolves to loopback, then the job says the address is not allowed, not what it resolved to", async () => {
    const urls = [`http://localhost:${port}/ok.png`];
    const job = await failedJob(service, urls);
    assertPublicMessage(job.error_message, "input image 1 could not be fetched: the address is not allowed", urls);
    assert.deepEqual(images.hits, []);
  });

  it("when an input URL spells loopback as a number or as IPv4-compatible IPv6, then it is refused too", async () => {
    for (const host of ["2130706433", "0x7f.1", "[::7f00:1]", "[::127.0.0.1]", "[::ffff:127.0.0.1]"]) {
      const urls = [`http://${host}:${port}/ok.png`];
      const job = await failedJob(service, urls);
      assertPublicMessage(job.error_message, "input image 1 could not be fetched: the address is not allowed", urls);
    }
    assert.deepEqual(images.hits, []);
  });
});

describe("input image fetch failures in public terms (INPUT_FETCH_TIMEOUT=1s, MAX_INPUT_BYTES=64KiB)", () => {
  let service: TestService;
  let images: LocalServer;
  before(async () => {
    service = await startTestService({ INPUT_FETCH_TIMEOUT: "1s", MAX_INPUT_BYTES: String(MAX_INPUT_BYTES) });
    images = await startImageServer();
  });
  after(async () => {
    await images.close();
    await service.close();
  });

  it("when nothing listens on the input URL's port, then the job says the connection was refused, without the errno, address or port", async () => {
    const urls = [await closedPortUrl()];
    const job = await failedJob(service, urls);
    assertPublicMessage(job.error_message, "input image 1 could not be fetched: the connection was refused", urls);
  });

  it("when the server answers 404, then the job says so by status", async () => {
    const urls = [`${images.url}/missing.png`];
    const job = await failedJob(service, urls);
    assertPublicMessage(job.error_message, "input image 1 could not be fetched: the server answered HTTP 404", urls);
  });

  it("when the second of two URLs fails, then the job names input image 2", async () => {
    const urls = [`${images.url}/ok.png?first`, `${images.url}/missing.png?second`];
    const job = await failedJob(service, urls);
    assertPublicMessage(job.error_message, "input image 2 could not be fetched: the server answered HTTP 404", urls);
  });

  it("when the server redirects, then the job says the redirect was not followed", async () => {
    const urls = [`${images.url}/moved.png`];
    const job = await failedJob(service, urls);
    assertPublicMessage(job.error_message, "input image 1 could not be fetched: the server answered HTTP 302 (redirects are not followed)", urls);
  });

  it("when the image is larger than the input budget, declared or not, then the job names the limit", async () => {
    for (const path of ["/big.png", "/big-chunked.png"]) {
      const urls = [`${images.url}${path}`];
      const job = await failedJob(service, urls);
      assertPublicMessage(job.error_message, `input image 1 could not be fetched: larger than the ${MAX_INPUT_BYTES}-byte limit`, urls);
    }
  });

  it("when the server never answers, then the job says it timed out after the fetch timeout", async () => {
    const urls = [`${images.url}/slow.png`];
    const job = await failedJob(service, urls);
    assertPublicMessage(job.error_message, "input image 1 could not be fetched: timed out after 1 s", urls);
  });

  it("when the URL carries credentials in its userinfo and query, then the message repeats neither", async () => {
    const urls = [`http://alice:hunter2@${new URL(images.url).host}/missing.png?signature=s3cr3t-token`];
    const job = await failedJob(service, urls);
    assertPublicMessage(job.error_message, "input image 1 could not be fetched: the server answered HTTP 404", urls);
    assert.ok(!JSON.stringify(job).includes("hunter2") && !JSON.stringify(job).includes("s3cr3t-token"), JSON.stringify(job));
  });
});
