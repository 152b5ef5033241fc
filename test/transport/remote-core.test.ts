// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { balanceOf, call, createCustomer, finishedJob, startTestService, type ApiResponse, type TestService } from "../support/harness.js";
import { probePng } from "../support/media-probe.js";
import { assertVendorError, chunkText, readSse, streamRequest, userTurn, VENDOR } from "../support/vendor-helpers.js";

/** Same status, same body, same Retry-After: the remote hop must be invisible to clients. */
function assertSameAnswer(local: ApiResponse, remote: ApiResponse, status: number, code: string) {
  assert.equal(local.status, status, local.text);
  assert.equal(remote.status, status, remote.text);
  assert.equal(remote.json?.error?.code, code, remote.text);
  assert.deepEqual(remote.json, local.json);
  assert.equal(remote.headers.get("retry-after"), local.headers.get("retry-after"));
}

describe("a gateway in front of a remote core (CORE_URL)", () => {
  let core: TestService;
  let gateway: TestService;
  before(async () => {
    core = await startTestService();
    gateway = await startTestService({ CORE_URL: core.grpcUrl });
  });
  after(async () => {
    await gateway?.close();
    await core?.close();
  });

  it("runs as a gateway only: it serves no gRPC port of its own", () => {
    assert.equal(gateway.grpcUrl, "");
    assert.notEqual(gateway.url, core.url);
  });

  it("creates a job through the remote gateway for an account made through the first's admin, and both gateways show the same job", async () => {
    const customer = await createCustomer(core, "1.00");
    const created = await call(gateway, "POST", "/api/v1/generations", {
      key: customer.apiKey,
      body: { model: "aimodel-3-pro-image", prompt: "a red fox in snow", aspect_ratio: "16:9", resolution: "1K" },
    });
    assert.equal(created.status, 202, created.text);
    assert.equal(created.json.status, "queued");
    assert.equal(created.json.status_url, `/api/v1/jobs/${created.json.job_id}`);
    assert.equal(created.headers.get("location"), created.json.status_url);

    const viaGateway = await finishedJob(gateway, customer.apiKey, created.json.job_id);
    const viaCore = (await call(core, "GET", `/api/v1/jobs/${created.json.job_id}`, { key: customer.apiKey })).json;
    assert.equal(viaGateway.status, "done");
    // Result URLs are signed anew on every read, so only they may differ.
    const withoutUrl = (job: any) => ({ ...job, result: { ...job.result, image_url: undefined } });
    assert.deepEqual(withoutUrl(viaGateway), withoutUrl(viaCore));

    for (const url of [viaGateway.result.image_url, viaCore.result.image_url]) {
      const image = await fetch(url);
      assert.equal(image.status, 200);
      assert.deepEqual(probePng(new Uint8Array(await image.arrayBuffer())), { width: 1024, height: 576 });
    }
    // The signed path is host-independent: the remote gateway serves the file through the core too.
    const signed = new URL(viaCore.result.image_url);
    const throughGateway = await fetch(gateway.url + signed.pathname + signed.search);
    assert.equal(throughGateway.status, 200);
    assert.equal(throughGateway.headers.get("content-type"), "image/png");

    const expected = { balance: "0.866", reserved: "0.00", available: "0.866", currency: "USD" };
    assert.deepEqual(await balanceOf(gateway, customer.apiKey), expected);
    assert.deepEqual(await balanceOf(core, customer.apiKey), expected);
  });

  it("serves the admin API through the remote hop", async () => {
    const customer = await createCustomer(gateway, "2.00");
    const credited = await call(gateway, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { admin: true, body: { amount: "0.50" } });
    assert.equal(credited.status, 200, credited.text);
    assert.equal(credited.json.balance, "2.50");
    const read = await call(core, "GET", `/admin/v1/accounts/${customer.accountId}/balance`, { admin: true });
    assert.equal(read.json.balance, "2.50");
    assert.equal((await call(gateway, "GET", "/admin/v1/prices")).status, 401);
  });

  it("keeps 401, 422 (vendor: 400), 402 (vendor: 402), 404 and 503 with their status, body and Retry-After through the remote hop", async () => {
    const rich = await createCustomer(core, "10.00");
    const poor = await createCustomer(core, "0.01");
    const both = async (path: string, options: Parameters<typeof call>[3], method = "POST") =>
      [await call(core, method, path, options), await call(gateway, method, path, options)] as const;

    const image = { model: "aimodel-3-pro-image", prompt: "a fox", aspect_ratio: "1:1", resolution: "1K" };
    assertSameAnswer(...(await both("/api/v1/generations", { body: image })), 401, "missing_api_key");
    assertSameAnswer(...(await both("/api/v1/generations", { key: "gsk_wrong", body: image })), 401, "invalid_api_key");
    assertSameAnswer(...(await both("/api/v1/generations", { key: rich.apiKey, body: { ...image, model: "aimodel-nope" } })), 422, "unknown_model");
    assertSameAnswer(
      ...(await both("/api/v1/generations", { key: rich.apiKey, body: { ...image, model: "aimodel-2.5-flash-image", aspect_ratio: "1:8" } })),
      422,
      "unsupported_aspect_ratio",
    );
    assertSameAnswer(...(await both("/api/v1/generations", { key: poor.apiKey, body: image })), 402, "insufficient_funds");
    assertSameAnswer(
      ...(await both("/api/v1/jobs/00000000-0000-4000-8000-000000000000", { key: rich.apiKey }, "GET")),
      404,
      "job_not_found",
    );

    const paused = await call(core, "PUT", "/admin/v1/models/aimodel-nbx-2.1/pause", { admin: true, body: { paused: true } });
    assert.equal(paused.status, 200);
    try {
      const [local, remote] = await both("/api/v1/generations", { key: rich.apiKey, body: { ...image, model: "aimodel-nbx-2.1" } });
      assertSameAnswer(local, remote, 503, "model_paused");
      assert.match(remote.headers.get("retry-after") ?? "", /^\d+$/);
    } finally {
      await call(core, "PUT", "/admin/v1/models/aimodel-nbx-2.1/pause", { admin: true, body: { paused: false } });
    }

    const text = userTurn("hi");
    const generate = (model: string) => `${VENDOR}/models/${model}:generateContent`;
    const [vendorLocal, vendorRemote] = await both(generate("aimodel-3.5-flash"), { body: text });
    assertVendorError(vendorRemote, 401, "UNAUTHENTICATED");
    assert.deepEqual(vendorRemote.json, vendorLocal.json);
    assertVendorError((await both(generate("aimodel-nope"), { vendorKey: rich.apiKey, body: text }))[1], 404, "NOT_FOUND");
    assertVendorError((await both(generate("videomodel-3.1-generate-001"), { vendorKey: rich.apiKey, body: text }))[1], 400, "INVALID_ARGUMENT");
    const zero = await createCustomer(core, "0.00");
    assertVendorError((await both(generate("aimodel-3.5-flash"), { vendorKey: zero.apiKey, body: text }))[1], 402, "RESOURCE_EXHAUSTED");

    assert.deepEqual(await balanceOf(core, poor.apiKey), { balance: "0.01", reserved: "0.00", available: "0.01", currency: "USD" });
  });

  it("streams SSE text through the remote hop with the same chunks as the local gateway", async () => {
    const customer = await createCustomer(core, "1.00");
    const prompt = "name three rivers";
    const local = await readSse(await streamRequest(core, "aimodel-3.5-flash", userTurn(prompt), { key: customer.apiKey }));
    const response = await streamRequest(gateway, "aimodel-3.5-flash", userTurn(prompt), { key: customer.apiKey });
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
    const remote = await readSse(response);
    assert.ok(remote.chunks.length >= 3);
    assert.equal(remote.chunks.map(chunkText).join(""), local.chunks.map(chunkText).join(""));
    assert.deepEqual(remote.chunks.at(-1)!.usageMetadata, local.chunks.at(-1)!.usageMetadata);
    assert.equal(remote.chunks.at(-1)!.candidates![0]!.finishReason, "STOP");
  });

  it("when a text call goes through the remote hop, then its Server-Timing still names the provider's time apart from ours", async () => {
    const customer = await createCustomer(core, "1.00");
    const answer = await call(gateway, "POST", `${VENDOR}/models/aimodel-3.5-flash:generateContent`, {
      headers: { "x-vendor-api-key": customer.apiKey }, body: userTurn("name a river"),
    });
    assert.equal(answer.status, 200, answer.text);
    assert.match(answer.headers.get("server-timing") ?? "", /^gateway;dur=\d+\.\d\d, upstream;dur=\d+\.\d\d$/);
    const balance = await call(gateway, "GET", "/api/v1/balance", { key: customer.apiKey });
    assert.match(balance.headers.get("server-timing") ?? "", /^gateway;dur=\d+\.\d\d$/, "no provider, no upstream");
  });

  it("creates a video interaction through the remote gateway", async () => {
    const customer = await createCustomer(core, "5.00");
    const created = await call(gateway, "POST", `${VENDOR}/interactions`, {
      vendorKey: customer.apiKey,
      body: { model: "videomodel-3.1-generate-001", instances: [{ prompt: "rain on a window" }], parameters: { durationSeconds: 2 } },
    });
    assert.equal(created.status, 202, created.text);
    const job = await finishedJob(core, customer.apiKey, created.json.job_id);
    assert.equal(job.status, "done");
    assert.equal((await balanceOf(gateway, customer.apiKey)).balance, "4.20");
  });
});
