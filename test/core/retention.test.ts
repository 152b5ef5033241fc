// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { call, createCustomer, eventually, finishedJob, pico, startTestService, type TestService } from "../support/harness.js";
import { checkedBalance } from "../support/billing-helpers.js";

/**
 * JOB_RETENTION (issue 7): finished jobs and their files are removed once past
 * the retention, on both backends (a sweeper on SQLite and the blob directory,
 * TTLs on Cassandra); accounts, keys and balances are never touched.
 */
describe("retention of finished jobs", () => {
  let service: TestService;
  before(async () => {
    // 4 s: long enough that polling (under a loaded CI) sees the job done before its row expires (Cassandra TTL), short enough to wait for.
    service = await startTestService({ JOB_RETENTION: "4s", RETENTION_SWEEP_INTERVAL: "200ms" });
  });
  after(() => service.close());

  it("when a finished job is older than JOB_RETENTION, then it and its file are gone while the account, its key and its balance stay", async () => {
    const customer = await createCustomer(service, "1.00");
    const created = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey, body: { model: "aimodel-3.1-flash-image", prompt: "a kite", aspect_ratio: "1:1", resolution: "1K" },
    });
    assert.equal(created.status, 202, created.text);
    const job = await finishedJob(service, customer.apiKey, created.json.job_id);
    assert.equal(job.status, "done");
    const link = job.result.image_url as string;
    assert.equal((await fetch(link)).status, 200, "the file is there while the job is kept");

    await eventually(
      () => call(service, "GET", `/api/v1/jobs/${created.json.job_id}`, { key: customer.apiKey }),
      (r) => r.status === 404,
      { timeoutMs: 20_000, intervalMs: 200, what: "the job to be removed after its retention" },
    );
    await eventually(async () => (await fetch(link)).status, (status) => status === 404, {
      timeoutMs: 20_000, intervalMs: 200, what: "the result file to be removed",
    });

    const balance = await checkedBalance(service, customer.apiKey);
    assert.equal(pico(balance.balance), pico("1.00") - pico("0.067"), "the money moved by a removed job stays moved");
    assert.equal(pico(balance.reserved), 0n);
  });
});
