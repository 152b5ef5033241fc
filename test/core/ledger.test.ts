// backends: embedded, real
/**
 * The account statement and usage reports (issue 10, "Money"): GET
 * /api/v1/ledger (and the admin API for any account) lists every credit,
 * hold, charge and release, newest first, each with the balance after it, and
 * reconciles to the cent; GET /api/v1/usage reports settled charges by model,
 * key or day. Bad input is 400 and changes nothing. Both backends (TEST_BACKEND).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { LedgerEntrySource, LedgerEntryType, UsageGrouping } from "../../gen/generation/v1/money_pb.js";
import { SIMULATOR_MARKERS } from "../../src/adapters/provider/simulated/simulated-provider.js";
import { balanceOf, call, createCustomer, finishedJob, pico, startTestService, type Customer, type TestService } from "../support/harness.js";
import { assertPlatformError, postGeneration } from "../support/jobs-api-helpers.js";
import { allEntries, assertLedgerReconciles } from "../support/ledger-helpers.js";

const IMAGE = "aimodel-2.5-flash-image";
const TEXT = "aimodel-3.5-flash";

let service: TestService;

before(async () => {
  service = await startTestService({ SIMULATED_LATENCY_MS: "20" });
});

after(async () => {
  await service?.close();
});

async function runJob(customer: Customer, body: Record<string, unknown>) {
  const created = await postGeneration(service, customer.apiKey, body);
  assert.equal(created.status, 202, created.text);
  return finishedJob(service, customer.apiKey, created.json.job_id);
}

const image = { model: IMAGE, prompt: "a kite", aspect_ratio: "1:1" };

/** An account with a history: opening credit, a top-up, a done image, a failed job, a canceled job, a text job and a text call. */
async function busyAccount() {
  const customer = await createCustomer(service, "10.00");
  const credit = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { admin: true, body: { amount: "2.50" } });
  assert.equal(credit.status, 200, credit.text);
  const done = await runJob(customer, image);
  const failed = await runJob(customer, { ...image, prompt: `fails ${SIMULATOR_MARKERS.fail}` });
  const queued = await postGeneration(service, customer.apiKey, { ...image, prompt: `slow ${SIMULATOR_MARKERS.slow}` });
  const canceled = await call(service, "POST", `/api/v1/jobs/${queued.json.job_id}/cancel`, { key: customer.apiKey });
  assert.equal(canceled.status, 200, canceled.text);
  const text = await runJob(customer, { model: TEXT, prompt: "Write one line about tides" });
  const call1 = await call(service, "POST", `/api/aimodel/v1beta/models/${TEXT}:generateContent`, {
    vendorKey: customer.apiKey, body: { contents: [{ parts: [{ text: "Say hello" }] }] },
  });
  assert.equal(call1.status, 200, call1.text);
  return { customer, done, failed, canceled: canceled.json, text, call: call1.json };
}

describe("the account statement", () => {
  it("when an account has credits, jobs that succeeded, failed or were canceled, and text calls, then its statement reconciles to the cent", async () => {
    const { customer, done, failed, canceled, text } = await busyAccount();
    const entries = await assertLedgerReconciles(service, { key: customer.apiKey });
    const chronological = [...entries].reverse();
    assert.deepEqual(chronological.slice(0, 2).map((e) => [e.type, e.amount, e.job_id, e.model]), [
      ["credit", "10.00", null, null], ["credit", "2.50", null, null],
    ]);
    const ofJob = (jobId: string) => chronological.filter((e) => e.job_id === jobId).map((e) => e.type);
    assert.deepEqual(ofJob(done.job_id), ["hold", "charge"]);
    assert.deepEqual(ofJob(failed.job_id), ["hold", "release"]);
    assert.deepEqual(ofJob(canceled.job_id), ["hold", "release"]);
    assert.deepEqual(ofJob(text.job_id), ["hold", "charge"]);
    const charge = chronological.find((e) => e.job_id === done.job_id && e.type === "charge")!;
    assert.equal(pico(charge.amount), -pico(done.usage.charged));
    assert.equal(charge.model, IMAGE);
    assert.match(charge.key_id ?? "", /^key_/);
    const hold = chronological.find((e) => e.job_id === done.job_id && e.type === "hold")!;
    assert.equal(hold.amount, "0.00");
    assert.equal(pico(hold.reserved_change), pico(done.usage.reserved));
    const textCharge = chronological.find((e) => e.job_id === text.job_id && e.type === "charge")!;
    assert.equal(textCharge.prompt_token_count, text.usage.prompt_token_count);
    assert.equal(textCharge.candidates_token_count, text.usage.candidates_token_count);
    // The synchronous text call: a hold and a charge with no job, the model and key named.
    const callEntries = chronological.filter((e) => e.job_id === null && e.type !== "credit");
    assert.deepEqual(callEntries.map((e) => [e.type, e.model]), [["hold", TEXT], ["charge", TEXT]]);
    for (let i = 1; i < chronological.length; i++) {
      assert.ok(chronological[i]!.created_at >= chronological[i - 1]!.created_at, "times never go back along the statement");
    }
  });

  it("when a job fails or is canceled, then its release entry says job_failed or job_canceled, to the key, the operator and gRPC, and no other entry gives a reason", async () => {
    const { customer, failed, canceled } = await busyAccount();
    const reasons = (entries: { type: string; job_id: string | null; reason: string | null }[]) =>
      entries.filter((e) => e.reason !== null).map((e) => [e.job_id, e.type, e.reason]).sort();
    const expected = [[failed.job_id, "release", "job_failed"], [canceled.job_id, "release", "job_canceled"]].sort();
    assert.deepEqual(reasons(await allEntries(service, { key: customer.apiKey })), expected);
    assert.deepEqual(reasons(await allEntries(service, { accountId: customer.accountId })), expected);
    const client = createClient(GenerationService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const page = await client.listLedgerEntries({ limit: 100 }, { headers: { authorization: `Bearer ${customer.apiKey}` } });
    assert.deepEqual(
      page.entries.filter((e) => e.reason !== "").map((e) => [e.jobId, e.type, e.reason]).sort(),
      [[failed.job_id, LedgerEntryType.RELEASE, "job_failed"], [canceled.job_id, LedgerEntryType.RELEASE, "job_canceled"]].sort(),
    );
  });

  it("when the statement is read in pages, then the pages are the whole statement in order, none twice, and the operator sees the same", async () => {
    const { customer } = await busyAccount();
    const whole = await allEntries(service, { key: customer.apiKey }, 100);
    const paged = await allEntries(service, { key: customer.apiKey }, 3);
    assert.deepEqual(paged, whole);
    assert.deepEqual(await allEntries(service, { accountId: customer.accountId }, 2), whole);
  });

  it("when from and to bound the statement, then only entries written in [from, to) are listed", async () => {
    const { customer } = await busyAccount();
    const whole = await allEntries(service, { key: customer.apiKey });
    const pivot = whole[Math.floor(whole.length / 2)]!.created_at;
    const newer = await call(service, "GET", `/api/v1/ledger?limit=100&from=${encodeURIComponent(pivot)}`, { key: customer.apiKey });
    const older = await call(service, "GET", `/api/v1/ledger?limit=100&to=${encodeURIComponent(pivot)}`, { key: customer.apiKey });
    assert.deepEqual([...newer.json.entries, ...older.json.entries], whole);
    assert.ok(newer.json.entries.every((e: any) => e.created_at >= pivot));
    assert.ok(older.json.entries.every((e: any) => e.created_at < pivot));
  });

  it("when the statement is filtered by source, type, model or key, then it lists exactly the matching entries, in pages, to the key, the operator and gRPC", async () => {
    const { customer, text } = await busyAccount();
    const whole = await allEntries(service, { key: customer.apiKey });
    const textCalls = whole.filter((e) => e.job_id === null && e.model !== null);
    assert.deepEqual(textCalls.map((e) => [e.type, e.model]), [["charge", TEXT], ["hold", TEXT]]);
    const cases: [string, (e: (typeof whole)[number]) => boolean][] = [
      ["source=text_call", (e) => e.job_id === null && e.model !== null],
      ["source=text_call&type=charge,release", (e) => e.job_id === null && e.model !== null && (e.type === "charge" || e.type === "release")],
      ["source=job", (e) => e.job_id !== null],
      ["type=credit", (e) => e.type === "credit"],
      [`model=${TEXT}`, (e) => e.model === TEXT],
      [`key_id=${textCalls[0]!.key_id}&type=hold`, (e) => e.key_id === textCalls[0]!.key_id && e.type === "hold"],
    ];
    for (const [filter, matches] of cases) {
      const expected = whole.filter(matches);
      assert.ok(expected.length > 0, filter);
      assert.deepEqual(await allEntries(service, { key: customer.apiKey }, 100, filter), expected, filter);
      assert.deepEqual(await allEntries(service, { key: customer.apiKey }, 1, filter), expected, `${filter}, one entry a page`);
      assert.deepEqual(await allEntries(service, { accountId: customer.accountId }, 2, filter), expected, `${filter}, the operator`);
    }
    const textCharge = whole.find((e) => e.job_id === text.job_id && e.type === "charge")!;
    assert.ok(!(await allEntries(service, { key: customer.apiKey }, 100, "source=text_call")).some((e) => e.entry_id === textCharge.entry_id));
    const client = createClient(GenerationService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const page = await client.listLedgerEntries(
      { limit: 10, source: LedgerEntrySource.TEXT_CALL, types: [LedgerEntryType.CHARGE] },
      { headers: { authorization: `Bearer ${customer.apiKey}` } },
    );
    assert.deepEqual(page.entries.map((e) => [e.type, e.model, e.jobId, e.amount]), [[LedgerEntryType.CHARGE, TEXT, undefined, textCalls[0]!.amount]]);
  });

  it("when the query is bad, then 400 with the reason, after the key is checked, and nothing changes", async () => {
    const customer = await createCustomer(service, "10.00");
    await runJob(customer, image);
    const first = await call(service, "GET", "/api/v1/ledger?limit=1", { key: customer.apiKey });
    const token = first.json.next_page_token as string;
    assert.ok(token);
    const cases: [string, string][] = [
      ["limit=0", "invalid_limit"], ["limit=101", "invalid_limit"], ["limit=abc", "invalid_limit"],
      ["from=yesterday", "invalid_timestamp"], ["from=2026-11-23T10:00:00Z&to=2026-11-22T10:00:00Z", "invalid_time_range"],
      ["page_token=nonsense", "invalid_page_token"], [`page_token=${encodeURIComponent(token.slice(0, -2))}xy`, "invalid_page_token"],
      [`page_token=${encodeURIComponent(token)}&from=2026-01-01T00:00:00Z`, "invalid_page_token"], ["limit=1&limit=2", "invalid_query"],
      ["type=charge,refund", "invalid_entry_type"], ["source=jobs", "invalid_entry_source"], ["model=no-such-model", "invalid_model"],
      [`page_token=${encodeURIComponent(token)}&type=charge`, "invalid_page_token"],
    ];
    const before = await allEntries(service, { key: customer.apiKey });
    for (const [query, code] of cases) assertPlatformError(await call(service, "GET", `/api/v1/ledger?${query}`, { key: customer.apiKey }), 400, code);
    assertPlatformError(await call(service, "GET", "/api/v1/ledger?limit=0"), 401, "missing_api_key");
    const stranger = await createCustomer(service, "1.00");
    assertPlatformError(await call(service, "GET", `/api/v1/ledger?page_token=${encodeURIComponent(token)}`, { key: stranger.apiKey }), 400, "invalid_page_token");
    assert.deepEqual(await allEntries(service, { key: customer.apiKey }), before);
    assertPlatformError(await call(service, "GET", "/admin/v1/accounts/acct_missing/ledger", { admin: true }), 404, "account_not_found");
  });

  it("when ListLedgerEntries is called over gRPC, then it answers the entries newest first with typed amounts", async () => {
    const customer = await createCustomer(service, "3.00");
    await runJob(customer, image);
    const client = createClient(GenerationService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const page = await client.listLedgerEntries({ limit: 10 }, { headers: { authorization: `Bearer ${customer.apiKey}` } });
    assert.deepEqual(page.entries.map((e) => e.type), [LedgerEntryType.CHARGE, LedgerEntryType.HOLD, LedgerEntryType.CREDIT]);
    assert.equal(page.entries[0]!.balanceAfter, (await balanceOf(service, customer.apiKey)).balance);
    assert.equal(page.nextPageToken, "");
  });
});

describe("usage reports", () => {
  it("when usage is grouped by model, key or day, then it counts settled charges only, with exact spend and tokens", async () => {
    const { customer, done, text, call: textCall } = await busyAccount();
    const byModel = await call(service, "GET", "/api/v1/usage?group_by=model", { key: customer.apiKey });
    assert.equal(byModel.status, 200, byModel.text);
    const imageRow = byModel.json.rows.find((r: any) => r.model === IMAGE);
    assert.deepEqual(imageRow, { model: IMAGE, requests: 1, prompt_token_count: 0, candidates_token_count: 0, spend: done.usage.charged });
    const textRow = byModel.json.rows.find((r: any) => r.model === TEXT);
    assert.equal(textRow.requests, 2, "the text job and the synchronous call");
    assert.equal(textRow.prompt_token_count, text.usage.prompt_token_count + textCall.usageMetadata.promptTokenCount);
    assert.deepEqual(byModel.json.rows.map((r: any) => r.model), [...byModel.json.rows.map((r: any) => r.model)].sort());
    const total = byModel.json.rows.reduce((sum: bigint, r: any) => sum + pico(r.spend), 0n);
    const balance = await balanceOf(service, customer.apiKey);
    assert.equal(total, pico("12.50") - pico(balance.balance), "spend is exactly what left the balance");

    const byKey = await call(service, "GET", "/api/v1/usage?group_by=key", { key: customer.apiKey });
    assert.equal(byKey.json.rows.length, 1);
    assert.match(byKey.json.rows[0].key_id, /^key_/);
    assert.equal(pico(byKey.json.rows[0].spend), total);
    assert.equal(byKey.json.rows[0].requests, 3);

    const byDay = await call(service, "GET", "/api/v1/usage?group_by=day", { key: customer.apiKey });
    assert.equal(byDay.json.rows.reduce((n: number, r: any) => n + r.requests, 0), 3);
    assert.match(byDay.json.rows[0].day, /^\d{4}-\d{2}-\d{2}$/);

    const admin = await call(service, "GET", `/admin/v1/accounts/${customer.accountId}/usage?group_by=model`, { admin: true });
    assert.deepEqual(admin.json.rows, byModel.json.rows);
  });

  it("when the range is explicit, then only charges inside it count, and the answer names the range", async () => {
    const customer = await createCustomer(service, "5.00");
    await runJob(customer, image);
    const future = await call(service, "GET", "/api/v1/usage?from=2099-01-01T00:00:00Z&to=2099-01-02T00:00:00Z", { key: customer.apiKey });
    assert.equal(future.status, 200, future.text);
    assert.deepEqual(future.json, { from: "2099-01-01T00:00:00.000Z", to: "2099-01-02T00:00:00.000Z", rows: [] });
    const client = createClient(GenerationService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const usage = await client.getUsage({ groupBy: UsageGrouping.MODEL }, { headers: { authorization: `Bearer ${customer.apiKey}` } });
    assert.equal(usage.rows.length, 1);
    assert.equal(usage.rows[0]!.group.case, "model");
  });

  it("when the grouping, the times or the range are bad, then 400 with the reason", async () => {
    const customer = await createCustomer(service, "1.00");
    for (const [query, code] of [
      ["group_by=week", "invalid_group_by"], ["from=2025-01-01T00:00:00Z&to=2026-06-01T00:00:00Z", "invalid_time_range"],
      ["from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", "invalid_time_range"], ["to=soon", "invalid_timestamp"],
      ["group_by=day&group_by=key", "invalid_query"],
    ] as const) {
      assertPlatformError(await call(service, "GET", `/api/v1/usage?${query}`, { key: customer.apiKey }), 400, code);
    }
    assertPlatformError(await call(service, "GET", "/api/v1/usage?group_by=week"), 401, "missing_api_key");
  });
});
