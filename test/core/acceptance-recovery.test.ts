// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { Job } from "../../src/domain/jobs/job.js";
import { StepwiseAcceptanceWrites } from "../../src/adapters/shared/stepwise-acceptance-writes.js";
import { call, createCustomer, eventually, finishedJob, pico, startTestService, type TestService } from "../support/harness.js";
import { checkedBalance } from "../support/billing-helpers.js";

/**
 * The Idempotency-Key and the job it stands for never drift apart: a retry
 * after an acceptance that died either replays the job that acceptance stored
 * or fences that job off and creates one, never both (issue 7, "one
 * Idempotency-Key, two jobs, both charged"). A process death is played by the
 * real stores failing or hanging at the exact step, through the real gateway.
 */
const PRICE = "0.067"; // aimodel-3.1-flash-image at 1K
const body = { model: "aimodel-3.1-flash-image", prompt: "a lantern", aspect_ratio: "1:1", resolution: "1K" };

function create(service: TestService, apiKey: string, key: string) {
  return call(service, "POST", "/api/v1/generations", { key: apiKey, body, headers: { "idempotency-key": key } });
}

/** The same request on a connection the test can cut, as a client that gave up would. */
function createAbortable(service: TestService, apiKey: string, key: string, signal: AbortSignal): Promise<Response> {
  return fetch(`${service.url}/api/v1/generations`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(body),
    signal,
  });
}

/** Retries the same key until the answer is no longer "still being accepted". */
async function retryUntilSettled(service: TestService, apiKey: string, key: string) {
  return eventually(() => create(service, apiKey, key), (r) => r.status !== 409, { timeoutMs: 15_000, intervalMs: 50, what: "the key to settle" });
}

describe("a retry after an acceptance that died", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ ACCEPT_TIMEOUT: "2s" });
  });
  after(() => service.close());

  it("when the job was stored but the key never completed, then the retry replays that job and nothing is charged twice", async () => {
    const customer = await createCustomer(service, "1.00");
    const store = service.running.core!.deps.idempotency;
    const complete = store.complete;
    // The process "dies" between storing the job and recording the key as complete.
    store.complete = async () => {
      throw new Error("process died before completing the key");
    };
    const key = randomUUID();
    let first: Awaited<ReturnType<typeof create>>;
    try {
      first = await create(service, customer.apiKey, key);
    } finally {
      store.complete = complete;
    }
    assert.equal(first.status, 202, first.text);

    const early = await create(service, customer.apiKey, key);
    assert.equal(early.status, 409, "within ACCEPT_TIMEOUT the key is still being accepted");
    assert.equal(early.json.error.code, "idempotency_key_in_use");
    assert.ok(early.headers.get("retry-after"));

    const retry = await retryUntilSettled(service, customer.apiKey, key);
    assert.equal(retry.status, 202, retry.text);
    assert.equal(retry.json.job_id, first.json.job_id, "the retry answers the job the dead acceptance stored");
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    const again = await create(service, customer.apiKey, key);
    assert.equal(again.json.job_id, first.json.job_id, "the key is completed now");

    assert.equal((await finishedJob(service, customer.apiKey, first.json.job_id)).status, "done");
    const balance = await checkedBalance(service, customer.apiKey);
    assert.equal(pico(balance.reserved), 0n);
    assert.equal(pico(balance.balance), pico("1.00") - pico(PRICE), `charged once: ${balance.balance}`);
  });

  it("when the acceptance hung before storing its job, then the retry fences its job off, releases any hold it took and creates exactly one job", async () => {
    const customer = await createCustomer(service, "1.00");
    const deps = service.running.core!.deps;
    let resume!: () => void;
    const resumed = new Promise<void>((resolve) => (resume = resolve));
    let hungId: string | undefined;
    let restore: () => void;
    // Where the stores write an acceptance in one transaction (the embedded file), the first acceptance freezes
    // right before that write, holding nothing yet; where it takes the steps one by one, right before storing
    // its job, with its money already held.
    const oneWrite = deps.acceptanceWrites instanceof StepwiseAcceptanceWrites ? undefined : deps.acceptanceWrites;
    if (oneWrite) {
      const accept = oneWrite.accept;
      restore = () => (oneWrite.accept = accept);
      oneWrite.accept = async (job, hold, announcement) => {
        if (hungId === undefined) {
          hungId = job.id;
          await resumed;
        }
        return accept.call(oneWrite, job, hold, announcement);
      };
    } else {
      const jobs = deps.jobs;
      const createJob = jobs.create;
      restore = () => (jobs.create = createJob);
      jobs.create = async (job: Job) => {
        if (hungId === undefined) {
          hungId = job.id;
          await resumed;
        }
        return createJob.call(jobs, job);
      };
    }
    const key = randomUUID();
    const abandoned = new AbortController();
    const firstAnswer = createAbortable(service, customer.apiKey, key, abandoned.signal);
    firstAnswer.catch(() => undefined);
    try {
      await eventually(async () => hungId, (id) => id !== undefined, { what: "the first acceptance to reach the store" });
      const held = await checkedBalance(service, customer.apiKey);
      assert.equal(pico(held.reserved), oneWrite ? 0n : pico(PRICE), oneWrite ? "nothing is held before the one write" : "the frozen acceptance holds the price");

      const retry = await retryUntilSettled(service, customer.apiKey, key);
      assert.equal(retry.status, 202, retry.text);
      assert.notEqual(retry.json.job_id, hungId, "the dead acceptance's job is not the one answered");
      assert.equal(retry.headers.get("idempotent-replayed"), null);
    } finally {
      restore();
      resume();
    }
    // The frozen acceptance wakes up: its job was fenced off, so it cannot appear any more.
    const late = await firstAnswer.then((r) => r.status, () => "aborted");
    abandoned.abort();
    assert.equal(late, 409, "the fenced acceptance cannot succeed: it is told a retry superseded it");
    const ghost = await call(service, "GET", `/api/v1/jobs/${hungId}`, { key: customer.apiKey });
    assert.equal(ghost.status, 404, "the fenced job was never stored");

    const retried = await create(service, customer.apiKey, key);
    assert.equal(retried.headers.get("idempotent-replayed"), "true");
    assert.equal((await finishedJob(service, customer.apiKey, retried.json.job_id)).status, "done");
    const balance = await checkedBalance(service, customer.apiKey);
    assert.equal(pico(balance.reserved), 0n, "the dead acceptance's hold was released");
    assert.equal(pico(balance.balance), pico("1.00") - pico(PRICE), `exactly one job charged: ${balance.balance}`);
  });
});
