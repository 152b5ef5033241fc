// backends: embedded, real
/**
 * Per-key limits (issue 10): spend limits (total, per UTC day and month) and
 * rate limits (per minute, jobs at once) set at key creation and changed
 * through admin, enforced atomically with the reservation (402
 * key_spend_limit_exceeded, 429 with Retry-After), reported on GET
 * /admin/v1/keys/{key_id} with spent and remaining. Both backends (TEST_BACKEND).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/generation/v1/admin_service_pb.js";
import { SIMULATOR_MARKERS } from "../../src/adapters/provider/simulated/simulated-provider.js";
import { ADMIN_TOKEN, balanceOf, call, eventually, finishedJob, pico, startTestService, type TestService } from "../support/harness.js";
import { assertPlatformError, assertVendorError, postGeneration } from "../support/jobs-api-helpers.js";
import { assertLedgerReconciles } from "../support/ledger-helpers.js";

const IMAGE = "aimodel-2.5-flash-image"; // 0.039 per image
const TEXT = "aimodel-3.5-flash";
const image = (extra: Record<string, unknown> = {}) => ({ model: IMAGE, prompt: "a kite", aspect_ratio: "1:1", ...extra });

let service: TestService;

before(async () => {
  service = await startTestService({ SIMULATED_LATENCY_MS: "30" });
});

after(async () => {
  await service?.close();
});

async function account(balance = "10.00"): Promise<string> {
  const created = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name: "limits", balance } });
  assert.equal(created.status, 201, created.text);
  return created.json.account_id as string;
}

async function keyWith(accountId: string, limits: Record<string, unknown>) {
  const created = await call(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { models: ["*"], ...limits } });
  assert.equal(created.status, 201, created.text);
  return created.json as { key_id: string; api_key: string; [field: string]: unknown };
}

const keyOf = (keyId: string) => call(service, "GET", `/admin/v1/keys/${keyId}`, { admin: true });

describe("per-key limits", () => {
  it("when a key is created with limits, then it echoes them and GET shows them with nothing spent and the whole limit remaining", async () => {
    const key = await keyWith(await account(), {
      spend_limit: "25.00", daily_spend_limit: "5.00", monthly_spend_limit: "20", rate_limit_per_minute: 60, max_concurrent_jobs: 4,
    });
    assert.deepEqual(
      [key.spend_limit, key.daily_spend_limit, key.monthly_spend_limit, key.rate_limit_per_minute, key.max_concurrent_jobs],
      ["25.00", "5.00", "20.00", 60, 4],
    );
    const read = await keyOf(key.key_id);
    assert.equal(read.status, 200, read.text);
    assert.deepEqual({ ...read.json, created_at: undefined }, {
      key_id: key.key_id, account_id: key.account_id, models: ["*"], revoked: false, created_at: undefined,
      spend_limit: "25.00", daily_spend_limit: "5.00", monthly_spend_limit: "20.00", rate_limit_per_minute: 60, max_concurrent_jobs: 4,
      spent: "0.00", spent_today: "0.00", spent_this_month: "0.00", held: "0.00",
      remaining: "25.00", remaining_today: "5.00", remaining_this_month: "20.00", name: "", rotation_grace_expire_time: null,
    });
    const plain = await keyWith(await account(), {});
    assert.equal(plain.spend_limit, null);
    assert.equal((await keyOf(plain.key_id)).json.remaining, null);
  });

  it("when a key's spend limit is tighter than the balance, then jobs past it are 402 key_spend_limit_exceeded and move nothing", async () => {
    const accountId = await account("10.00");
    const key = await keyWith(accountId, { spend_limit: "0.10" });
    for (let i = 0; i < 2; i++) assert.equal((await postGeneration(service, key.api_key, image())).status, 202);
    const refused = await postGeneration(service, key.api_key, image());
    assertPlatformError(refused, 402, "key_spend_limit_exceeded");
    assert.match(refused.json.error.message, /spend_limit/);
    const balance = await balanceOf(service, key.api_key);
    assert.equal(balance.reserved === "0.078" || balance.reserved === "0.039" || balance.reserved === "0.00", true, JSON.stringify(balance));
    // Once both jobs are done: spent 0.078, 0.022 remaining, and the third still refused.
    await eventually(() => keyOf(key.key_id), (r) => r.json.spent === "0.078" && r.json.held === "0.00", { what: "both charges" });
    const read = await keyOf(key.key_id);
    assert.deepEqual([read.json.spent, read.json.spent_today, read.json.remaining], ["0.078", "0.078", "0.022"]);
    assertPlatformError(await postGeneration(service, key.api_key, image()), 402, "key_spend_limit_exceeded");
    assert.equal((await balanceOf(service, key.api_key)).balance, "9.922");
    // Another key of the same account is not limited by this one's spend.
    const other = await keyWith(accountId, {});
    assert.equal((await postGeneration(service, other.api_key, image())).status, 202);
  });

  it("when the daily or monthly limit is reached, then the next request is refused naming that limit", async () => {
    const accountId = await account("10.00");
    const daily = await keyWith(accountId, { daily_spend_limit: "0.05" });
    assert.equal((await postGeneration(service, daily.api_key, image())).status, 202);
    const refused = await postGeneration(service, daily.api_key, image());
    assertPlatformError(refused, 402, "key_spend_limit_exceeded");
    assert.match(refused.json.error.message, /daily_spend_limit/);
    const monthly = await keyWith(accountId, { monthly_spend_limit: "0.04" });
    assert.equal((await postGeneration(service, monthly.api_key, image())).status, 202);
    assert.match((await postGeneration(service, monthly.api_key, image())).json.error.message, /monthly_spend_limit/);
  });

  it("when a key makes more requests in a minute than its rate, then 429 key_rate_limit_exceeded with Retry-After until the minute ends", async () => {
    const key = await keyWith(await account(), { rate_limit_per_minute: 2 });
    // Start early in a minute, so all three requests fall in the same one.
    await eventually(async () => new Date().getUTCSeconds(), (second) => second < 45, { timeoutMs: 20_000, intervalMs: 200, what: "the start of a minute" });
    assert.equal((await postGeneration(service, key.api_key, image())).status, 202);
    assert.equal((await postGeneration(service, key.api_key, image())).status, 202);
    const refused = await postGeneration(service, key.api_key, image());
    assertPlatformError(refused, 429, "key_rate_limit_exceeded");
    const retryAfter = Number(refused.headers.get("retry-after"));
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    assert.ok(Math.abs(retryAfter - (60 - new Date().getUTCSeconds())) <= 1, `Retry-After ${retryAfter}: until the minute's end`);
  });

  it("when a key has as many jobs running as allowed, then another job is 429 key_concurrency_limit_exceeded, while a text call still goes", async () => {
    const key = await keyWith(await account(), { max_concurrent_jobs: 1 });
    const first = await postGeneration(service, key.api_key, image({ prompt: `slow ${SIMULATOR_MARKERS.slow}` }));
    assert.equal(first.status, 202);
    const refused = await postGeneration(service, key.api_key, image());
    assertPlatformError(refused, 429, "key_concurrency_limit_exceeded");
    assert.ok(Number(refused.headers.get("retry-after")) >= 1);
    const text = await call(service, "POST", `/api/aimodel/v1beta/models/${TEXT}:generateContent`, {
      vendorKey: key.api_key, body: { contents: [{ parts: [{ text: "hi" }] }] },
    });
    assert.equal(text.status, 200, text.text);
    assert.equal((await call(service, "POST", `/api/v1/jobs/${first.json.job_id}/cancel`, { key: key.api_key })).status, 200);
    assert.equal((await postGeneration(service, key.api_key, image())).status, 202, "a slot is free once the job ended");
  });

  it("when a synchronous text call would pass the key's spend limit, then it is refused 402 too, in the vendor's shape", async () => {
    const key = await keyWith(await account(), { spend_limit: "0.000001" });
    const refused = await call(service, "POST", `/api/aimodel/v1beta/models/${TEXT}:generateContent`, {
      vendorKey: key.api_key, body: { contents: [{ parts: [{ text: "Write a long essay about tides" }] }] },
    });
    assertVendorError(refused, 402, "FAILED_PRECONDITION", "KEY_SPEND_LIMIT_EXCEEDED");
  });

  it("when limits are changed with PATCH, then sent fields change, null removes, others stay, and the next request obeys", async () => {
    const accountId = await account();
    const key = await keyWith(accountId, { spend_limit: "0.01", rate_limit_per_minute: 100 });
    assertPlatformError(await postGeneration(service, key.api_key, image()), 402, "key_spend_limit_exceeded");
    const raised = await call(service, "PATCH", `/admin/v1/keys/${key.key_id}`, { admin: true, body: { spend_limit: "1.00", max_concurrent_jobs: 3 } });
    assert.equal(raised.status, 200, raised.text);
    assert.deepEqual([raised.json.spend_limit, raised.json.rate_limit_per_minute, raised.json.max_concurrent_jobs], ["1.00", 100, 3]);
    assert.equal((await postGeneration(service, key.api_key, image())).status, 202);
    const cleared = await call(service, "PATCH", `/admin/v1/keys/${key.key_id}`, { admin: true, body: { spend_limit: null, rate_limit_per_minute: null } });
    assert.deepEqual([cleared.json.spend_limit, cleared.json.rate_limit_per_minute, cleared.json.max_concurrent_jobs, cleared.json.remaining], [null, null, 3, null]);
  });

  it("when limits are out of range or malformed, then 400 invalid_key_limit (422 for a number where money is a string), and nothing changes", async () => {
    const accountId = await account();
    const key = await keyWith(accountId, { spend_limit: "5.00" });
    for (const body of [{ spend_limit: "-1" }, { daily_spend_limit: "1e3" }, { rate_limit_per_minute: 0 }, { max_concurrent_jobs: 1.5 }, { max_concurrent_jobs: 100_001 }]) {
      assertPlatformError(await call(service, "PATCH", `/admin/v1/keys/${key.key_id}`, { admin: true, body }), 400, "invalid_key_limit");
      assertPlatformError(
        await call(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { models: ["*"], ...body } }), 400, "invalid_key_limit",
      );
    }
    assertPlatformError(await call(service, "PATCH", `/admin/v1/keys/${key.key_id}`, { admin: true, body: { spend_limit: 5 } }), 422, "validation_failed");
    assertPlatformError(await call(service, "PATCH", `/admin/v1/keys/${key.key_id}`, { admin: true, body: { colour: "red" } }), 422, "validation_failed");
    assert.equal((await keyOf(key.key_id)).json.spend_limit, "5.00");
    assertPlatformError(await keyOf("key_nope"), 404, "key_not_found");
    assertPlatformError(await call(service, "PATCH", "/admin/v1/keys/key_nope", { admin: true, body: { spend_limit: "1" } }), 404, "key_not_found");
    assertPlatformError(await call(service, "GET", `/admin/v1/keys/${key.key_id}`), 401, "invalid_admin_token");
  });

  it("when many requests race for a key limit tighter than the balance, then exactly the limit's worth is accepted and the statement reconciles", async () => {
    const accountId = await account("100.00");
    const key = await keyWith(accountId, { spend_limit: "0.39" }); // exactly 10 images
    const answers = await Promise.all(Array.from({ length: 40 }, () => postGeneration(service, key.api_key, image())));
    const statuses = answers.map((a) => a.status);
    assert.equal(statuses.filter((s) => s === 202).length, 10, JSON.stringify(statuses));
    assert.equal(statuses.filter((s) => s === 402).length, 30);
    for (const refused of answers.filter((a) => a.status === 402)) assert.equal(refused.json.error.code, "key_spend_limit_exceeded");
    for (const accepted of answers.filter((a) => a.status === 202)) await finishedJob(service, key.api_key, accepted.json.job_id);
    const read = await keyOf(key.key_id);
    assert.deepEqual([read.json.spent, read.json.remaining, read.json.held], ["0.39", "0.00", "0.00"]);
    assert.equal(pico((await balanceOf(service, key.api_key)).balance), pico("100.00") - pico("0.39"));
    await assertLedgerReconciles(service, { key: key.api_key });
  });

  it("when GetApiKey and UpdateApiKey are called over gRPC, then they read and change the limits with an update mask", async () => {
    const key = await keyWith(await account(), { spend_limit: "2.00" });
    const client = createClient(AdminService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const headers = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const read = await client.getApiKey({ keyId: key.key_id }, { headers });
    assert.equal(read.key?.limits?.spendLimit, "2.00");
    const updated = await client.updateApiKey(
      { keyId: key.key_id, limits: { rateLimitPerMinute: 7 }, updateMask: { paths: ["rate_limit_per_minute", "spend_limit"] } },
      { headers },
    );
    assert.equal(updated.key?.limits?.rateLimitPerMinute, 7);
    assert.equal(updated.key?.limits?.spendLimit, undefined, "named and unset: removed");
  });
});
