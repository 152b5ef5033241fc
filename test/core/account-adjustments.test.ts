// backends: embedded, real
/**
 * Issue 39, decisions 0037 and 0038 (both backends, TEST_BACKEND): an operator's adjustment with its reason, in the
 * statement (JSON and CSV, and its `type` filter); refused adjustments move nothing; an account renamed is found by
 * its new name, not its old one; the low-balance threshold is set and shown.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { call, startTestService, type TestService } from "../support/harness.js";
import { assertPlatformError, postGeneration } from "../support/jobs-api-helpers.js";

let service: TestService;

before(async () => {
  service = await startTestService({ SIMULATED_LATENCY_MS: "20000" });
});

after(async () => {
  await service?.close();
});

async function account(balance: string, name: string): Promise<string> {
  const created = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name, balance } });
  assert.equal(created.status, 201, created.text);
  return created.json.account_id as string;
}

const adjust = (accountId: string, body: unknown) => call(service, "POST", `/admin/v1/accounts/${accountId}/adjustments`, { admin: true, body });
const statement = async (accountId: string, query = "") =>
  (await call(service, "GET", `/admin/v1/accounts/${accountId}/ledger${query}`, { admin: true })).json.entries as Record<string, unknown>[];

describe("operator adjustments", () => {
  it("when an account is credited and debited with reasons, then the statement shows both as adjustments with their reasons, in JSON and CSV", async () => {
    const accountId = await account("10.00", "adjusted");
    const credit = await adjust(accountId, { amount: "2.50", reason: "  goodwill for the outage  " });
    assert.equal(credit.status, 201, credit.text);
    assert.deepEqual([credit.json.balance, credit.json.available, credit.json.entry.type, credit.json.entry.amount, credit.json.entry.adjustment_reason],
      ["12.50", "12.50", "adjustment", "2.50", "goodwill for the outage"]);
    const debit = await adjust(accountId, { amount: "-5.00", reason: "refund for job j_1, paid twice" });
    assert.equal(debit.status, 201, debit.text);
    assert.equal(debit.json.balance, "7.50");

    const entries = await statement(accountId);
    assert.deepEqual(entries.map((e) => [e.type, e.amount, e.balance_after, e.adjustment_reason]), [
      ["adjustment", "-5.00", "7.50", "refund for job j_1, paid twice"],
      ["adjustment", "2.50", "12.50", "goodwill for the outage"],
      ["credit", "10.00", "10.00", null],
    ]);
    assert.equal(debit.json.entry.entry_id, entries[0]!.entry_id, "the answer's entry is the statement's");
    const filtered = await statement(accountId, "?type=adjustment");
    assert.deepEqual(filtered.map((e) => e.amount), ["-5.00", "2.50"]);

    const csv = await call(service, "GET", `/admin/v1/accounts/${accountId}/ledger`, { admin: true, headers: { accept: "text/csv" } });
    assert.equal(csv.status, 200, csv.text);
    const [header, first] = csv.text.split("\r\n");
    const columns = header!.split(",");
    const row = first!.split(",");
    assert.equal(row[columns.indexOf("type")], "adjustment");
    assert.equal(row[columns.indexOf("amount")], "-5.00");
    assert.ok(first!.endsWith('"refund for job j_1, paid twice"'), first);
  });

  it("when an adjustment is refused (no reason, blank reason, zero, a bad amount, a debit beyond available, an unknown account), then nothing moves", async () => {
    const accountId = await account("1.00", "refusals");
    const key = (await call(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { models: ["*"] } })).json.api_key as string;
    // A hold of 0.039 leaves 0.961 available of a 1.00 balance (the job waits: the simulated latency is long).
    assert.equal((await postGeneration(service, key, { model: "aimodel-2.5-flash-image", prompt: "a kite", aspect_ratio: "1:1" })).status, 202);
    const before = await statement(accountId);

    assert.equal((await adjust(accountId, { amount: "-1.00" })).status, 422, "reason is required by the schema");
    assertPlatformError(await adjust(accountId, { amount: "-1.00", reason: "   " }), 422, "invalid_reason");
    assertPlatformError(await adjust(accountId, { amount: "1.00", reason: "x".repeat(501) }), 422, "invalid_reason");
    assertPlatformError(await adjust(accountId, { amount: "0.00", reason: "nothing" }), 422, "invalid_amount");
    assertPlatformError(await adjust(accountId, { amount: "-0", reason: "nothing" }), 422, "invalid_amount");
    assertPlatformError(await adjust(accountId, { amount: "1e3", reason: "float" }), 422, "invalid_amount");
    assertPlatformError(await adjust(accountId, { amount: "--1.00", reason: "two signs" }), 422, "invalid_amount");
    assertPlatformError(await adjust(accountId, { amount: "-0.962", reason: "more than available" }), 409, "insufficient_funds");
    assertPlatformError(await adjust("acct_missing", { amount: "1.00", reason: "nobody" }), 404, "account_not_found");

    assert.deepEqual(await statement(accountId), before, "the statement is as it was");
    const balance = (await call(service, "GET", `/admin/v1/accounts/${accountId}/balance`, { admin: true })).json;
    assert.deepEqual([balance.balance, balance.reserved, balance.available], ["1.00", "0.039", "0.961"]);
    const exact = await adjust(accountId, { amount: "-0.961", reason: "all that is available" });
    assert.equal(exact.status, 201, exact.text);
    assert.deepEqual([exact.json.balance, exact.json.available], ["0.039", "0.00"]);
  });
});

describe("account name and settings", () => {
  it("when an account is renamed, then the list finds it by its new name prefix and no longer by its old one", async () => {
    const tag = `ren${Date.now().toString(36)}`;
    const accountId = await account("3.00", `${tag}-before`);
    const patched = await call(service, "PATCH", `/admin/v1/accounts/${accountId}`, { admin: true, body: { name: `${tag}-After Co` } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.name, `${tag}-After Co`);
    const byNew = await call(service, "GET", `/admin/v1/accounts?q=${encodeURIComponent(`${tag}-after`)}`, { admin: true });
    assert.deepEqual(byNew.json.accounts.map((a: { account_id: string }) => a.account_id), [accountId]);
    const byOld = await call(service, "GET", `/admin/v1/accounts?q=${encodeURIComponent(`${tag}-before`)}`, { admin: true });
    assert.deepEqual(byOld.json.accounts, []);
    const shown = await call(service, "GET", `/admin/v1/accounts/${accountId}`, { admin: true });
    assert.equal(shown.status, 200, shown.text);
    assert.deepEqual([shown.json.name, shown.json.balance, shown.json.status, shown.json.low_balance_threshold, shown.json.low_balance, shown.json.webhook_url],
      [`${tag}-After Co`, "3.00", "active", null, false, null]);
  });

  it("when a threshold is set above available, then the account shows low_balance; removed, it does not; bad values are refused", async () => {
    const accountId = await account("3.00", "threshold");
    const set = await call(service, "PATCH", `/admin/v1/accounts/${accountId}`, { admin: true, body: { low_balance_threshold: "5.00" } });
    assert.equal(set.status, 200, set.text);
    assert.deepEqual([set.json.low_balance_threshold, set.json.low_balance], ["5.00", true]);
    const removed = await call(service, "PATCH", `/admin/v1/accounts/${accountId}`, { admin: true, body: { low_balance_threshold: null } });
    assert.deepEqual([removed.json.low_balance_threshold, removed.json.low_balance], [null, false]);
    assertPlatformError(await call(service, "PATCH", `/admin/v1/accounts/${accountId}`, { admin: true, body: { low_balance_threshold: "-1" } }), 422, "invalid_amount");
    assertPlatformError(await call(service, "PATCH", `/admin/v1/accounts/${accountId}`, { admin: true, body: { name: "" } }), 422, "invalid_name");
    assertPlatformError(await call(service, "PATCH", "/admin/v1/accounts/acct_missing", { admin: true, body: { name: "x" } }), 404, "account_not_found");
  });
});
