// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { balanceOf, createCustomer, eventually, startTestService, type Customer, type TestService } from "../support/harness.js";
import { openAiBaseUrl, PNG_DATA_URI, statementCharge } from "../support/openai-helpers.js";
import { allEntries } from "../support/ledger-helpers.js";
import { tokenCharge, VENDOR } from "../support/vendor-helpers.js";
import { assertUntouched, FLASH } from "../support/vendor-sdk-helpers.js";
import { startVendorStub, type VendorStub } from "../support/vendor-stub.js";

/**
 * Images given by http(s) link (issue 38): OpenAI's `image_url` and the vendor's `fileData.fileUri` are fetched by
 * the service through the jobs' input fetcher (address policy, size, type, timeout) and sent upstream inline.
 */
const PNG = Buffer.from(PNG_DATA_URI.split(",")[1]!, "base64");
/** An image larger than the 1 KiB MAX_INPUT_BYTES of the refusing service. */
const BIG_PNG = Buffer.concat([PNG, Buffer.alloc(4096)]);

interface ImageServer {
  readonly url: string;
  /** GETs received, by path. */
  readonly hits: Map<string, number>;
  /** Requests whose connection the fetcher closed before they were answered, by path. */
  readonly dropped: Map<string, number>;
  close(): Promise<void>;
}

/** A real HTTP server on loopback serving what the links name; /slow never answers. */
async function startImageServer(): Promise<ImageServer> {
  const hits = new Map<string, number>();
  const dropped = new Map<string, number>();
  const server: Server = createServer((request, response) => {
    response.on("close", () => {
      if (!response.writableFinished) dropped.set(request.url ?? "", (dropped.get(request.url ?? "") ?? 0) + 1);
    });
    hits.set(request.url ?? "", (hits.get(request.url ?? "") ?? 0) + 1);
    const path = (request.url ?? "").split("?")[0];
    if (path === "/pixel.png") return response.writeHead(200, { "content-type": "image/png" }).end(PNG);
    if (path === "/big.png") return response.writeHead(200, { "content-type": "image/png" }).end(BIG_PNG);
    if (path === "/page.html") return response.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end("<html></html>");
    if (path === "/slow.png") return; // never answered: the fetch times out
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    dropped,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

const client = (service: TestService, apiKey: string) => new OpenAI({ apiKey, baseURL: openAiBaseUrl(service), maxRetries: 0 });

const withImage = (url: string): OpenAI.ChatCompletionMessageParam[] => [
  { role: "user", content: [{ type: "text", text: "What is in this picture?" }, { type: "image_url", image_url: { url } }] },
];

const chargeOf = (usage: OpenAI.CompletionUsage) => tokenCharge(FLASH, usage.prompt_tokens, usage.completion_tokens);

async function apiError(work: () => Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const error = await work().then(() => assert.fail("expected the SDK to throw an APIError"), (thrown: unknown) => thrown);
  assert.ok(error instanceof OpenAI.APIError, `an APIError, got ${String(error)}`);
  return error;
}

describe("when OpenAI's JavaScript SDK sends an image as an http link to a server on loopback (upstream: the vendor stub)", () => {
  let images: ImageServer;
  let stub: VendorStub;
  let service: TestService;
  let customer: Customer;
  before(async () => {
    images = await startImageServer();
    stub = await startVendorStub();
    service = await startTestService({ VENDOR_BASE_URL: stub.url, VENDOR_API_KEY: stub.apiKey });
    customer = await createCustomer(service, "10.00");
  });
  after(async () => {
    await service?.close();
    await stub?.close();
    await images?.close();
  });

  const upstreamParts = () => (stub.requests.filter((r) => r.model === FLASH.model).at(-1)!.body as any).contents[0].parts;

  it("when the link serves a PNG, then the service fetches it once, the upstream gets it inline, and the statement charges exactly the usage", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const completion = await client(service, customer.apiKey).chat.completions.create({ model: FLASH.model, messages: withImage(`${images.url}/pixel.png`) });
    assert.equal(completion.choices[0]!.finish_reason, "stop");
    assert.equal(images.hits.get("/pixel.png"), 1);
    assert.deepEqual(upstreamParts()[1], { inlineData: { mimeType: "image/png", data: PNG.toString("base64") } });
    const { charged, entry } = await statementCharge(service, customer.apiKey, before);
    assert.equal(charged, chargeOf(completion.usage!));
    assert.deepEqual([entry.prompt_token_count, entry.candidates_token_count], [completion.usage!.prompt_tokens, completion.usage!.completion_tokens]);
    // The same bytes as a data URI are the same call: the same prompt tokens.
    const inline = await client(service, customer.apiKey).chat.completions.create({ model: FLASH.model, messages: withImage(PNG_DATA_URI) });
    assert.equal(inline.usage!.prompt_tokens, completion.usage!.prompt_tokens);
  });

  it("when the call is streamed, then the link is fetched the same way and the streamed usage is what is charged", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const stream = await client(service, customer.apiKey).chat.completions.create({
      model: FLASH.model, messages: withImage(`${images.url}/pixel.png?streamed`), stream: true, stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    assert.equal(images.hits.get("/pixel.png?streamed"), 1);
    assert.deepEqual(upstreamParts()[1].inlineData.data, PNG.toString("base64"));
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, chargeOf(usage!));
  });

  it("when the caller hangs up while the image is being fetched, then the fetch is abandoned and nothing is held or charged", async () => {
    const leaver = await createCustomer(service, "1.00");
    const controller = new AbortController();
    const call = client(service, leaver.apiKey).chat.completions.create(
      { model: FLASH.model, messages: withImage(`${images.url}/slow.png?leaver`) }, { signal: controller.signal },
    );
    const settled = call.then(() => "answered", (error: unknown) => (error instanceof OpenAI.APIUserAbortError ? "aborted" : String(error)));
    await eventually(() => images.hits.get("/slow.png?leaver"), (n) => n === 1, { what: "the fetch to start" });
    controller.abort();
    assert.equal(await settled, "aborted");
    await eventually(() => images.dropped.get("/slow.png?leaver"), (n) => n === 1, { what: "the service to drop the fetch" });
    await assertUntouched(service, leaver.apiKey, "1.00");
  });

  it("when the vendor surface names the image by fileData.fileUri, then it is fetched and sent inline too, and charged exactly", async () => {
    const before = await balanceOf(service, customer.apiKey);
    const response = await fetch(`${service.url}${VENDOR}/models/${FLASH.model}:generateContent`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-goog-api-key": customer.apiKey },
      body: JSON.stringify({
        contents: [{ role: "user", parts: [{ text: "What is in this picture?" }, { fileData: { mimeType: "image/png", fileUri: `${images.url}/pixel.png?vendor` } }] }],
      }),
    });
    const answer = (await response.json()) as any;
    assert.equal(response.status, 200, JSON.stringify(answer));
    assert.equal(images.hits.get("/pixel.png?vendor"), 1);
    assert.deepEqual(upstreamParts()[1], { inlineData: { mimeType: "image/png", data: PNG.toString("base64") } });
    const { promptTokenCount, candidatesTokenCount } = answer.usageMetadata;
    assert.equal((await statementCharge(service, customer.apiKey, before)).charged, tokenCharge(FLASH, promptTokenCount, candidatesTokenCount));
  });

  it("when fileData names a file by a gs:// address, then the vendor surface refuses it 400 naming the field, and nothing is held", async () => {
    const asker = await createCustomer(service, "1.00");
    const response = await fetch(`${service.url}${VENDOR}/models/${FLASH.model}:generateContent`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-goog-api-key": asker.apiKey },
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "look" }, { fileData: { mimeType: "image/png", fileUri: "gs://bucket/a.png" } }] }] }),
    });
    const { error } = (await response.json()) as any;
    assert.deepEqual([response.status, error.status], [400, "INVALID_ARGUMENT"]);
    assert.equal(error.message, "contents[0].parts[1].fileData.fileUri must be an http:// or https:// URL (this service stores no files)");
    await assertUntouched(service, asker.apiKey, "1.00");
  });
});

describe("when an image link is refused (the address policy on, 1 KiB of input, a 300 ms fetch timeout)", () => {
  let images: ImageServer;
  let open: TestService;
  let strict: TestService;
  before(async () => {
    images = await startImageServer();
    open = await startTestService({ MAX_INPUT_BYTES: "1KiB", INPUT_FETCH_TIMEOUT: "300ms" });
    strict = await startTestService({ ALLOW_PRIVATE_URLS: "false" });
  });
  after(async () => {
    await open?.close();
    await strict?.close();
    await images?.close();
  });

  /** The refusal the SDK raises, checked to have moved no money: no hold left, the statement as it was. */
  async function refusal(service: TestService, url: string, stream = false) {
    const asker = await createCustomer(service, "1.00");
    const entries = await allEntries(service, { key: asker.apiKey });
    const error = await apiError(() => client(service, asker.apiKey).chat.completions.create({ model: FLASH.model, messages: withImage(url), stream }));
    assert.ok(error instanceof OpenAI.BadRequestError, `400, got ${error.status}`);
    assert.deepEqual([error.type, error.param], ["invalid_request_error", "messages[0].content[1].image_url.url"]);
    await assertUntouched(service, asker.apiKey, "1.00");
    assert.deepEqual(await allEntries(service, { key: asker.apiKey }), entries, "nothing in the statement");
    return { code: error.code, message: (error.error as { message: string }).message };
  }

  it("when the link is a loopback address and private addresses are not allowed, then it is refused unfetched, naming the parameter", async () => {
    for (const stream of [false, true]) {
      const error = await refusal(strict, `${images.url}/pixel.png?private-${stream}`, stream);
      assert.equal(error.code, "missing_input_images");
      assert.equal(error.message, "messages[0].content[1].image_url.url: the image could not be fetched: the address is not allowed");
      assert.equal(images.hits.get(`/pixel.png?private-${stream}`), undefined, "no request reached the server");
    }
  });

  it("when the image is larger than MAX_INPUT_BYTES, then the download stops at the limit and the call is refused", async () => {
    const error = await refusal(open, `${images.url}/big.png`);
    assert.equal(error.code, "missing_input_images");
    assert.equal(error.message, "messages[0].content[1].image_url.url: the image could not be fetched: larger than the 1024-byte limit");
  });

  it("when the link answers a type that is not an image, then it is refused as unsupported_media_type naming what was answered", async () => {
    const error = await refusal(open, `${images.url}/page.html`);
    assert.equal(error.code, "unsupported_media_type");
    assert.equal(error.message, "messages[0].content[1].image_url.url: the server answered Content-Type text/html, not an image");
  });

  it("when the link answers 404, or not within INPUT_FETCH_TIMEOUT, then it is refused with the jobs' reason", async () => {
    assert.equal((await refusal(open, `${images.url}/gone.png`)).message,
      "messages[0].content[1].image_url.url: the image could not be fetched: the server answered HTTP 404");
    assert.equal((await refusal(open, `${images.url}/slow.png`)).message,
      "messages[0].content[1].image_url.url: the image could not be fetched: timed out after 300 ms");
  });

  it("when the link is not http(s) or a data URI, then the translation refuses it before anything is fetched", async () => {
    const error = await refusal(open, "ftp://example.com/a.png");
    assert.equal(error.message, "messages[0].content[1].image_url.url must be an http(s) URL or a data URI (data:<media type>;base64,<data>)");
  });
});
