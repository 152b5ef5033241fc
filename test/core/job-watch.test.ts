// backends: embedded, real
/**
 * Watch and wait (issue 10): GET /api/v1/jobs/{id}/events as Server-Sent
 * Events and the WatchJob RPC (one `event: job` per state change with the
 * job's JSON and an `id:`, keep-alive comments, Last-Event-ID resumes, the
 * stream ends after the terminal state), and `Prefer: wait=N` on creation
 * (200 with the finished job, or 202). Runs on both backends (TEST_BACKEND).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { JobStatus } from "../../gen/generation/v1/job_pb.js";
import { SIMULATOR_MARKERS } from "../../src/adapters/provider/simulated/simulated-provider.js";
import { balanceOf, call, createCustomer, eventually, finishedJob, pico, startTestService, type Customer, type TestService } from "../support/harness.js";
import { assertPlatformError, postGeneration } from "../support/jobs-api-helpers.js";
import { openSse } from "../support/sse-client.js";

const IMAGE = "aimodel-2.5-flash-image";
const image = (extra: Record<string, unknown> = {}) => ({ model: IMAGE, prompt: "a kite", aspect_ratio: "1:1", ...extra });

let service: TestService;

before(async () => {
  // 600 ms queued, 600 ms processing: every state lasts long enough to be seen; keep-alives every 100 ms.
  service = await startTestService({ SIMULATED_LATENCY_MS: "600", SSE_KEEPALIVE: "100ms" });
});

after(async () => {
  await service?.close();
});

async function createJob(customer: Customer, body: Record<string, unknown> = image()): Promise<string> {
  const response = await postGeneration(service, customer.apiKey, body);
  assert.equal(response.status, 202, response.text);
  return response.json.job_id as string;
}

const watch = (customer: Customer | undefined, jobId: string, headers: Record<string, string> = {}) =>
  openSse(`${service.url}/api/v1/jobs/${jobId}/events`, { ...(customer ? { authorization: `Bearer ${customer.apiKey}` } : {}), ...headers });

describe("watching a job", () => {
  it("when a job is watched from its creation, then it sees queued, processing and done once each, with ids 1-3 and the job's JSON, and the stream ends", async () => {
    const customer = await createCustomer(service, "10.00");
    const jobId = await createJob(customer);
    const stream = await watch(customer, jobId);
    assert.equal(stream.status, 200);
    assert.match(stream.headers.get("content-type") ?? "", /^text\/event-stream/);
    // No provider answers a watch: all of its time is ours.
    assert.match(stream.headers.get("server-timing") ?? "", /^gateway;dur=\d+\.\d\d$/);
    await stream.ended;
    assert.deepEqual(stream.events.map((e) => [e.event, e.id, JSON.parse(e.data).status]), [
      ["job", "1", "queued"], ["job", "2", "processing"], ["job", "3", "done"],
    ]);
    const last = JSON.parse(stream.events.at(-1)!.data);
    const polled = await call(service, "GET", `/api/v1/jobs/${jobId}`, { key: customer.apiKey });
    assert.deepEqual({ ...last, result: null }, { ...polled.json, result: null }, "the event's data is the job as GET shows it");
    assert.equal(last.usage.charged, polled.json.usage.charged);
    // The done event comes after the money moved: the balance already shows the charge.
    assert.equal((await balanceOf(service, customer.apiKey)).reserved, "0.00");
  });

  it("when a job changes nothing for a while, then the stream sends keep-alive comments", async () => {
    const customer = await createCustomer(service, "10.00");
    const jobId = await createJob(customer, image({ prompt: `a slow kite ${SIMULATOR_MARKERS.slow}` }));
    const stream = await watch(customer, jobId);
    await eventually(async () => stream.comments.length, (count) => count >= 2, { what: "keep-alive comments" });
    assert.ok(stream.comments.every((line) => line.startsWith(":")));
    stream.close();
    await call(service, "POST", `/api/v1/jobs/${jobId}/cancel`, { key: customer.apiKey });
  });

  it("when a watcher resumes with Last-Event-ID, then states it saw are not sent again", async () => {
    const customer = await createCustomer(service, "10.00");
    const jobId = await createJob(customer);
    await eventually(async () => (await call(service, "GET", `/api/v1/jobs/${jobId}`, { key: customer.apiKey })).json.status, (s) => s === "processing");
    const resumed = await watch(customer, jobId, { "last-event-id": "2" });
    await resumed.ended;
    assert.deepEqual(resumed.events.map((e) => [e.id, JSON.parse(e.data).status]), [["3", "done"]]);
    const after = await watch(customer, jobId, { "last-event-id": "3" });
    await after.ended;
    assert.equal(after.status, 200);
    assert.deepEqual(after.events, [], "nothing new after the terminal state");
    const unknownId = await watch(customer, jobId, { "last-event-id": "banana" });
    await unknownId.ended;
    assert.deepEqual(unknownId.events.map((e) => e.id), ["3"], "an id never sent counts as none");
  });

  it("when a watched job is canceled, then the stream's last event is canceled", async () => {
    const customer = await createCustomer(service, "10.00");
    const jobId = await createJob(customer, image({ prompt: `a slow kite ${SIMULATOR_MARKERS.slow}` }));
    const stream = await watch(customer, jobId);
    await eventually(async () => stream.events.length, (n) => n >= 1);
    assert.equal((await call(service, "POST", `/api/v1/jobs/${jobId}/cancel`, { key: customer.apiKey })).status, 200);
    await stream.ended;
    assert.equal(JSON.parse(stream.events.at(-1)!.data).status, "canceled");
    assert.equal(stream.events.at(-1)!.id, "3");
  });

  it("when the job is unknown or another account's, or the key is missing, then 404, 404 and 401 in the platform's shape", async () => {
    const owner = await createCustomer(service, "10.00");
    const stranger = await createCustomer(service, "10.00");
    const jobId = await createJob(owner);
    for (const [who, id, status, code] of [
      [stranger, jobId, 404, "job_not_found"], [owner, "00000000-0000-4000-8000-000000000000", 404, "job_not_found"], [owner, "not-a-uuid", 404, "job_not_found"],
      [owner, "%1C%F1%88%B9%A5", 404, "job_not_found"], [undefined, jobId, 401, "missing_api_key"],
    ] as const) {
      const stream = await watch(who, id);
      assert.equal(stream.status, status);
      assertPlatformError({ status: stream.status, headers: stream.headers, text: stream.text!, json: JSON.parse(stream.text!) }, status, code);
    }
  });

  it("when WatchJob is called over gRPC, then it streams each state once and ends after the terminal one", async () => {
    const customer = await createCustomer(service, "10.00");
    const client = createClient(GenerationService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const jobId = await createJob(customer);
    const seen: [string, JobStatus][] = [];
    for await (const message of client.watchJob({ jobId }, { headers: { authorization: `Bearer ${customer.apiKey}` } })) {
      seen.push([message.eventId, message.job!.status]);
    }
    assert.deepEqual(seen, [["1", JobStatus.QUEUED], ["2", JobStatus.PROCESSING], ["3", JobStatus.DONE]]);
  });
});

describe("Prefer: wait on creation", () => {
  it("when the job finishes within the wait, then the answer is 200 with the finished job and Preference-Applied", async () => {
    const customer = await createCustomer(service, "10.00");
    const response = await postGeneration(service, customer.apiKey, image(), { prefer: "wait=20" });
    assert.equal(response.status, 200, response.text);
    assert.equal(response.headers.get("preference-applied"), "wait=20");
    assert.equal(response.json.status, "done");
    assert.ok(response.json.result.image_url);
    assert.equal(response.headers.get("location"), `/api/v1/jobs/${response.json.job_id}`);
    const balance = await balanceOf(service, customer.apiKey);
    assert.equal(pico(balance.balance), pico("10.00") - pico(response.json.usage.charged));
  });

  it("when the job outlasts the wait, then the answer is the usual 202 once the wait is over", async () => {
    const customer = await createCustomer(service, "10.00");
    const started = Date.now();
    const response = await postGeneration(service, customer.apiKey, image({ prompt: `slow ${SIMULATOR_MARKERS.slow}` }), { prefer: "respond-async, wait=1" });
    assert.equal(response.status, 202, response.text);
    assert.ok(Date.now() - started >= 900, "it waited");
    assert.equal(response.json.status, "queued");
    await call(service, "POST", `/api/v1/jobs/${response.json.job_id}/cancel`, { key: customer.apiKey });
  });

  it("when the wait is over 60 or not a number, then 400 invalid_wait and nothing is created or charged", async () => {
    const customer = await createCustomer(service, "10.00");
    for (const prefer of ["wait=61", "wait=abc", "wait=-1", "wait=1.5"]) {
      const response = await postGeneration(service, customer.apiKey, image(), { prefer, "idempotency-key": `bad-${prefer}` });
      assertPlatformError(response, 400, "invalid_wait");
    }
    const listed = await call(service, "GET", "/api/v1/jobs", { key: customer.apiKey });
    assert.deepEqual(listed.json.jobs, []);
    assert.deepEqual(await balanceOf(service, customer.apiKey), { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
  });

  it("when a creation with a wait is retried with the same idempotency key, then the retry answers the same job", async () => {
    const customer = await createCustomer(service, "10.00");
    const first = await postGeneration(service, customer.apiKey, image(), { prefer: "wait=20", "idempotency-key": "wait-retry" });
    assert.equal(first.status, 200, first.text);
    const again = await postGeneration(service, customer.apiKey, image(), { "idempotency-key": "wait-retry" });
    assert.equal(again.status, 202, again.text);
    assert.equal(again.json.job_id, first.json.job_id);
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    await finishedJob(service, customer.apiKey, first.json.job_id);
  });
});
