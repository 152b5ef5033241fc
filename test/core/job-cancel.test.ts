// backends: embedded, real
/**
 * Cancel (issue 10): POST /api/v1/jobs/{id}/cancel and the CancelJob RPC. A
 * queued job is canceled at once with its whole hold released; a processing
 * job is aborted (an image job charged nothing, a text job what was
 * produced); a finished job is 409 job_already_finished; cancel is
 * idempotent; a cancel racing the job's end leaves one terminal state charged
 * once; the webhook says "canceled". Runs on both backends (TEST_BACKEND).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ErrorDetailSchema, GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { JobStatus } from "../../gen/generation/v1/job_pb.js";
import { SIMULATOR_MARKERS } from "../../src/adapters/provider/simulated/simulated-provider.js";
import {
  balanceOf, call, createCustomer, eventually, finishedJob, pico, startTestService, type Customer, type TestService,
} from "../support/harness.js";
import { assertPlatformError, postGeneration } from "../support/jobs-api-helpers.js";
import { assertLedgerReconciles } from "../support/ledger-helpers.js";

const IMAGE = "aimodel-2.5-flash-image";
const TEXT = "aimodel-3.5-flash";

let service: TestService;
let hooks: { url: string; bodies: any[]; server: Server };

before(async () => {
  // Jobs wait 1.5 s queued and take 1.5 s to generate: long enough to catch each state.
  service = await startTestService({ SIMULATED_LATENCY_MS: "1500" });
  const bodies: any[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      bodies.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      response.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  hooks = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies, server };
});

after(async () => {
  hooks?.server.closeAllConnections();
  await new Promise((resolve) => hooks?.server.close(resolve));
  await service?.close();
});

async function createJob(customer: Customer, body: Record<string, unknown>): Promise<string> {
  const response = await postGeneration(service, customer.apiKey, body);
  assert.equal(response.status, 202, response.text);
  return response.json.job_id as string;
}

const image = (extra: Record<string, unknown> = {}) => ({ model: IMAGE, prompt: "a kite", aspect_ratio: "1:1", ...extra });

function cancel(customer: Customer, jobId: string, body?: unknown) {
  return call(service, "POST", `/api/v1/jobs/${jobId}/cancel`, { key: customer.apiKey, ...(body === undefined ? {} : { body }) });
}

async function jobStatus(customer: Customer, jobId: string): Promise<string> {
  return (await call(service, "GET", `/api/v1/jobs/${jobId}`, { key: customer.apiKey })).json.status as string;
}

describe("cancel", () => {
  it("when a queued job is canceled, then it answers 200 canceled at once, the whole hold is released and the webhook says canceled", async () => {
    const customer = await createCustomer(service, "10.00");
    const jobId = await createJob(customer, image({ callback_url: hooks.url, metadata: { order: "q-1" } }));
    assert.equal(await jobStatus(customer, jobId), "queued");
    const answer = await cancel(customer, jobId);
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.job_id, jobId);
    assert.equal(answer.json.status, "canceled");
    assert.equal(answer.json.result, null);
    assert.equal(answer.json.error, null);
    assert.ok(answer.json.finished_at, "a canceled job has finished");
    assert.equal(pico(answer.json.usage.charged), 0n);
    assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
    const hook = await eventually(async () => hooks.bodies.find((body) => body.job_id === jobId), Boolean, { what: "the webhook" });
    assert.deepEqual(hook, { job_id: jobId, status: "canceled", metadata: { order: "q-1" } });
    // It never runs afterwards: still canceled once its queue time has passed.
    await eventually(() => jobStatus(customer, jobId), (status) => status === "canceled", { what: "the job to stay canceled" });
    assert.equal((await call(service, "GET", `/api/v1/jobs/${jobId}`, { key: customer.apiKey })).json.started_at, null);
  });

  it("when a processing image job is canceled, then it is aborted, charged nothing and ends canceled", async () => {
    const customer = await createCustomer(service, "10.00");
    const jobId = await createJob(customer, image({ prompt: `a kite ${SIMULATOR_MARKERS.slow}` }));
    await eventually(() => jobStatus(customer, jobId), (status) => status === "processing", { what: "processing" });
    const answer = await cancel(customer, jobId);
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.status, "canceled");
    assert.ok(answer.json.started_at);
    assert.equal(answer.json.usage.charged, "0.00");
    assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
  });

  it("when a processing text job is canceled, then it is charged exactly its reported usage so far, and the hold is gone", async () => {
    const customer = await createCustomer(service, "10.00");
    const prompt = `Write a long essay about tides ${SIMULATOR_MARKERS.slow}`;
    const jobId = await createJob(customer, { model: TEXT, prompt });
    await eventually(() => jobStatus(customer, jobId), (status) => status === "processing", { what: "processing" });
    const answer = await cancel(customer, jobId);
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.status, "canceled");
    const { usage } = answer.json;
    const prices = (await call(service, "GET", "/api/v1/models")).json.models.find((m: any) => m.id === TEXT).price;
    const perToken = (perMillion: string, tokens: number) => (pico(perMillion) * BigInt(tokens)) / 1_000_000n;
    const expected = perToken(prices.input_per_million_tokens, usage.prompt_token_count) + perToken(prices.output_per_million_tokens, usage.candidates_token_count);
    assert.equal(pico(usage.charged), expected, JSON.stringify(usage));
    assert.ok(pico(usage.charged) < pico(usage.reserved), "less than the whole answer");
    const balance = await balanceOf(service, customer.apiKey);
    assert.equal(pico(balance.balance), pico("10.00") - pico(usage.charged));
    assert.equal(balance.reserved, "0.00");
  });

  it("when a finished job is canceled, then it is 409 job_already_finished with the job, and nothing changes", async () => {
    const customer = await createCustomer(service, "10.00");
    const jobId = await createJob(customer, image());
    const done = await finishedJob(service, customer.apiKey, jobId);
    assert.equal(done.status, "done");
    const before = await balanceOf(service, customer.apiKey);
    const answer = await cancel(customer, jobId);
    assertPlatformError(answer, 409, "job_already_finished");
    assert.equal(answer.json.job.status, "done");
    assert.equal(answer.json.job.usage.charged, done.usage.charged);
    assert.deepEqual(await balanceOf(service, customer.apiKey), before);
    assert.equal(await jobStatus(customer, jobId), "done");
  });

  it("when a canceled job is canceled again, then it answers 200 canceled again and moves no money", async () => {
    const customer = await createCustomer(service, "10.00");
    const jobId = await createJob(customer, image());
    const first = await cancel(customer, jobId, {});
    assert.equal(first.status, 200, first.text);
    const again = await Promise.all([cancel(customer, jobId), cancel(customer, jobId)]);
    for (const answer of again) {
      assert.equal(answer.status, 200, answer.text);
      assert.deepEqual(answer.json, first.json);
    }
    assert.equal((await balanceOf(service, customer.apiKey)).balance, "10.00");
  });

  it("when the job is unknown, another account's, or the key is missing, then 404, 404 and 401, and the job runs on", async () => {
    const owner = await createCustomer(service, "10.00");
    const stranger = await createCustomer(service, "10.00");
    const jobId = await createJob(owner, image());
    assertPlatformError(await cancel(stranger, jobId), 404, "job_not_found");
    assertPlatformError(await cancel(owner, "00000000-0000-4000-8000-000000000000"), 404, "job_not_found");
    assertPlatformError(await cancel(owner, "not-a-uuid"), 404, "job_not_found");
    assertPlatformError(await call(service, "POST", `/api/v1/jobs/${jobId}/cancel`), 401, "missing_api_key");
    assertPlatformError(await cancel(owner, jobId, { reason: "x" }), 422, "validation_failed");
    assert.equal((await finishedJob(service, owner.apiKey, jobId)).status, "done");
  });

  it("when CancelJob is called over gRPC, then it answers the canceled job, and FAILED_PRECONDITION/job_already_finished (409) once finished", async () => {
    const customer = await createCustomer(service, "10.00");
    const client = createClient(GenerationService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const headers = { authorization: `Bearer ${customer.apiKey}` };
    const jobId = await createJob(customer, image());
    const { job } = await client.cancelJob({ jobId }, { headers });
    assert.equal(job?.status, JobStatus.CANCELED);
    assert.equal(job?.usage?.charged, "0.00");
    const other = await createJob(customer, image());
    await finishedJob(service, customer.apiKey, other);
    const refusal = await client.cancelJob({ jobId: other }, { headers }).then(
      () => assert.fail("a finished job was canceled"),
      (error: unknown) => ConnectError.from(error),
    );
    assert.equal(refusal.code, Code.FailedPrecondition);
    const detail = refusal.findDetails(ErrorDetailSchema)[0];
    assert.equal(detail?.reason, "job_already_finished");
    assert.equal(detail?.httpStatus, 409);
    assert.equal((detail?.facts as { status?: unknown } | undefined)?.status, "done");
  });
});

describe("cancel racing completion", () => {
  let racy: TestService;
  before(async () => {
    racy = await startTestService({ SIMULATED_LATENCY_MS: "40" });
  });
  after(async () => {
    await racy?.close();
  });

  it("when cancels race jobs finishing, many times, then each job ends in exactly one terminal state, charged once, and the balance agrees", async () => {
    const customer = await createCustomer(racy, "10.00");
    const price = pico((await call(racy, "GET", "/api/v1/models")).json.models.find((m: any) => m.id === IMAGE).price.per_image["1K"]);
    const rounds = 30;
    const outcomes = await Promise.all(
      Array.from({ length: rounds }, async (_, i) => {
        const created = await postGeneration(racy, customer.apiKey, image());
        assert.equal(created.status, 202, created.text);
        const jobId = created.json.job_id as string;
        // Spread the cancels over the job's life: queued, processing, finishing, finished.
        await new Promise((resolve) => setTimeout(resolve, (i * 7) % 120));
        const answer = await call(racy, "POST", `/api/v1/jobs/${jobId}/cancel`, { key: customer.apiKey });
        return { jobId, answer };
      }),
    );
    let expectedCharge = 0n;
    for (const { jobId, answer } of outcomes) {
      const final = await finishedJob(racy, customer.apiKey, jobId);
      if (answer.status === 200) {
        assert.equal(answer.json.status, "canceled");
        assert.equal(final.status, "canceled");
        assert.equal(final.usage.charged, "0.00");
      } else {
        assertPlatformError(answer, 409, "job_already_finished");
        assert.equal(final.status, "done");
        assert.equal(pico(final.usage.charged), price);
        expectedCharge += price;
      }
    }
    const balance = await balanceOf(racy, customer.apiKey);
    assert.equal(pico(balance.balance), pico("10.00") - expectedCharge);
    assert.equal(balance.reserved, "0.00");
    // The statement agrees: one hold per job, ended once (a charge for the done ones, a release for the canceled ones).
    const entries = await assertLedgerReconciles(racy, { key: customer.apiKey });
    for (const { jobId, answer } of outcomes) {
      const ends = entries.filter((e) => e.job_id === jobId && e.type !== "hold").map((e) => e.type);
      assert.deepEqual(ends, [answer.status === 200 ? "release" : "charge"], `job ${jobId}`);
    }
  });
});
