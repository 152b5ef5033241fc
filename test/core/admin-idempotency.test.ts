// backends: embedded, real
/**
 * Decision 0039: an operator's credit or adjustment under an Idempotency-Key moves money once, over REST and gRPC,
 * and so does a retry after a request that died between moving the money and recording its answer.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/generation/v1/admin_service_pb.js";
import { operationIdOf, operatorScope } from "../../src/core/accounts/keyed-money.js";
import { requestFingerprint } from "../../src/domain/idempotency/fingerprint.js";
import { ADMIN_TOKEN, call, createCustomer, eventually, pico, startTestService, type ApiResponse, type TestService } from "../support/harness.js";
import { assertPlatformError } from "../support/jobs-api-helpers.js";
import type { AuditEventJson } from "../support/audit-events.js";

let service: TestService;

before(async () => {
  // A claim older than ACCEPT_TIMEOUT belongs to a request that died: a retry takes it over.
  service = await startTestService({ ACCEPT_TIMEOUT: "1s" });
});

after(async () => {
  await service?.close();
});

async function account(balance = "10.00"): Promise<string> {
  const created = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name: "keyed money", balance } });
  assert.equal(created.status, 201, created.text);
  return created.json.account_id as string;
}

const credit = (accountId: string, body: unknown, key?: string) =>
  call(service, "POST", `/admin/v1/accounts/${accountId}/credits`, { admin: true, body, ...(key !== undefined && { headers: { "idempotency-key": key } }) });
const adjust = (accountId: string, body: unknown, key?: string) =>
  call(service, "POST", `/admin/v1/accounts/${accountId}/adjustments`, { admin: true, body, ...(key !== undefined && { headers: { "idempotency-key": key } }) });

/** The account's statement, newest first: type, amount and balance after of each entry. */
async function statement(accountId: string): Promise<[string, string, string][]> {
  const page = await call(service, "GET", `/admin/v1/accounts/${accountId}/ledger`, { admin: true });
  assert.equal(page.status, 200, page.text);
  return (page.json.entries as Record<string, string>[]).map((e) => [e.type!, e.amount!, e.balance_after!]);
}

async function balance(accountId: string): Promise<bigint> {
  const answer = await call(service, "GET", `/admin/v1/accounts/${accountId}/balance`, { admin: true });
  assert.equal(answer.status, 200, answer.text);
  return pico(answer.json.balance as string);
}

async function auditKinds(accountId: string, kind: string): Promise<AuditEventJson[]> {
  const page = await call(service, "GET", `/admin/v1/audit?account_id=${accountId}&kind=${kind}`, { admin: true });
  assert.equal(page.status, 200, page.text);
  return page.json.events as AuditEventJson[];
}

function assertReplayOf(response: ApiResponse, original: ApiResponse) {
  assert.equal(response.status, original.status, response.text);
  assert.equal(response.headers.get("idempotent-replayed"), "true");
  assert.deepEqual(response.json, original.json, "a replay answers the original body");
}

describe("Idempotency-Key on the operator's credits and adjustments", () => {
  it("when a credit is retried with the same key and body, then it answers the original 200 marked as a replay, and the money and the audit event are there once", async () => {
    const accountId = await account();
    const key = randomUUID();
    const first = await credit(accountId, { amount: "2.50", reason: "ticket 7" }, key);
    assert.equal(first.status, 200, first.text);
    assert.equal(first.headers.get("idempotent-replayed"), null, "the first answer is not a replay");
    assert.equal(first.json.balance, "12.50");
    // Another credit in between: the replay still answers the balance right after the first.
    assert.equal((await credit(accountId, { amount: "1.00" })).status, 200);
    assertReplayOf(await credit(accountId, { reason: "ticket 7", amount: "2.50" }, key), first);
    assertReplayOf(await credit(accountId, { amount: "2.50", reason: "ticket 7" }, `"${key}"`), first);

    assert.deepEqual(await statement(accountId), [["credit", "1.00", "13.50"], ["credit", "2.50", "12.50"], ["credit", "10.00", "10.00"]]);
    assert.equal(await balance(accountId), pico("13.50"));
    assert.equal((await auditKinds(accountId, "credit.added")).length, 2, "one event per credit, none for the replays");
  });

  it("when an adjustment is retried with the same key and body, then it answers the original 201 with the same entry, and moves money once", async () => {
    const accountId = await account();
    const key = randomUUID();
    const first = await adjust(accountId, { amount: "-4.00", reason: "refund, paid twice" }, key);
    assert.equal(first.status, 201, first.text);
    assert.equal(first.headers.get("idempotent-replayed"), null);
    const replay = await adjust(accountId, { amount: "-4.00", reason: "refund, paid twice" }, key);
    assertReplayOf(replay, first);
    assert.equal(replay.json.entry.entry_id, first.json.entry.entry_id);

    assert.deepEqual(await statement(accountId), [["adjustment", "-4.00", "6.00"], ["credit", "10.00", "10.00"]]);
    assert.equal(await balance(accountId), pico("6.00"));
    assert.equal((await auditKinds(accountId, "balance.adjusted")).length, 1);
  });

  it("when a key is sent again with another body, or malformed, then it is refused as on job creation and nothing moves", async () => {
    const accountId = await account();
    const key = randomUUID();
    assert.equal((await credit(accountId, { amount: "1.00" }, key)).status, 200);
    assertPlatformError(await credit(accountId, { amount: "2.00" }, key), 422, "idempotency_key_reused");
    assertPlatformError(await credit(accountId, { amount: "1.00", reason: "another" }, key), 422, "idempotency_key_reused");
    const adjustmentKey = randomUUID();
    assert.equal((await adjust(accountId, { amount: "1.00", reason: "a" }, adjustmentKey)).status, 201);
    assertPlatformError(await adjust(accountId, { amount: "-1.00", reason: "a" }, adjustmentKey), 422, "idempotency_key_reused");
    // One key names one request on the account: a credit's key sent with an adjustment is another request.
    assertPlatformError(await adjust(accountId, { amount: "1.00", reason: "a" }, key), 422, "idempotency_key_reused");
    // At most 255 characters, as on job creation (the same rule: core/jobs/idempotent.ts).
    const tooLong = "k".repeat(256);
    const customer = await createCustomer(service);
    const onJobs = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey, headers: { "idempotency-key": tooLong }, body: { model: "aimodel-3.1-flash-image", prompt: "a kite", aspect_ratio: "1:1" },
    });
    assertPlatformError(onJobs, 422, "invalid_idempotency_key");
    assertPlatformError(await credit(accountId, { amount: "1.00" }, tooLong), 422, "invalid_idempotency_key");
    assertPlatformError(await adjust(accountId, { amount: "1.00", reason: "a" }, tooLong), 422, "invalid_idempotency_key");

    assert.deepEqual(await statement(accountId), [["adjustment", "1.00", "12.00"], ["credit", "1.00", "11.00"], ["credit", "10.00", "10.00"]]);
    assert.equal(await balance(accountId), pico("12.00"));
  });

  it("when the same key is sent many times at once, then exactly one credit is made and every other answer is its replay or 409 idempotency_key_in_use", async () => {
    const accountId = await account();
    const key = randomUUID();
    const answers = await Promise.all(Array.from({ length: 8 }, () => credit(accountId, { amount: "0.50" }, key)));
    const fresh = answers.filter((a) => a.status === 200 && a.headers.get("idempotent-replayed") === null);
    assert.equal(fresh.length, 1, answers.map((a) => `${a.status} ${a.text}`).join("\n"));
    for (const answer of answers) {
      if (answer.status === 200) assert.deepEqual(answer.json, fresh[0]!.json);
      else assertPlatformError(answer, 409, "idempotency_key_in_use");
    }
    assert.deepEqual(await statement(accountId), [["credit", "0.50", "10.50"], ["credit", "10.00", "10.00"]]);
    assert.equal(await balance(accountId), pico("10.50"));
  });

  it("when one key is used on two accounts, then each account is credited: a key is scoped to the account it names", async () => {
    const [a, b] = [await account(), await account("1.00")];
    const key = randomUUID();
    const onA = await credit(a, { amount: "3.00" }, key);
    const onB = await credit(b, { amount: "3.00" }, key);
    assert.equal(onA.status, 200, onA.text);
    assert.equal(onB.status, 200, onB.text);
    assert.equal(onB.headers.get("idempotent-replayed"), null, "not a replay of account A's credit");
    assert.deepEqual([await balance(a), await balance(b)], [pico("13.00"), pico("4.00")]);
  });

  it("when AddCredits and AdjustBalance are called over gRPC with idempotency_key, then the repeat is marked replayed and money moves once", async () => {
    const accountId = await account();
    const client = createClient(AdminService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const options = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };
    const key = randomUUID();
    const first = await client.addCredits({ accountId, amount: "2.00", idempotencyKey: key }, options);
    const again = await client.addCredits({ accountId, amount: "2.00", idempotencyKey: key }, options);
    assert.deepEqual([first.replayed, again.replayed], [false, true]);
    assert.deepEqual(again.balance, first.balance);
    const adjustmentKey = randomUUID();
    const adjusted = await client.adjustBalance({ accountId, amount: "-1.00", reason: "grpc", idempotencyKey: adjustmentKey }, options);
    const readjusted = await client.adjustBalance({ accountId, amount: "-1.00", reason: "grpc", idempotencyKey: adjustmentKey }, options);
    assert.deepEqual([adjusted.replayed, readjusted.replayed], [false, true]);
    assert.deepEqual(readjusted.entry, adjusted.entry);
    assert.deepEqual(readjusted.balance, adjusted.balance);
    // The REST route and the RPC are one operation: the REST retry of the gRPC credit is its replay.
    const overRest = await credit(accountId, { amount: "2.00" }, key);
    assert.equal(overRest.headers.get("idempotent-replayed"), "true");
    assert.equal(overRest.json.balance, "12.00");
    assert.deepEqual(await statement(accountId), [["adjustment", "-1.00", "11.00"], ["credit", "2.00", "12.00"], ["credit", "10.00", "10.00"]]);
  });

  /**
   * What a request that died between moving the money and recording its answer leaves: its key claimed (naming its
   * operation) and the ledger's entry made under the operation id. Played through the real ports: the claim, then the
   * ledger driven directly with the derived id; the retry over HTTP must find that entry.
   */
  async function diedAfterTheMoney(accountId: string, key: string, operation: string, request: object) {
    const deps = service.running.core!.deps;
    const operationId = operationIdOf(accountId, key, operation, request);
    const claim = await deps.idempotency.claim(operatorScope(accountId), key, requestFingerprint(operation, request), { jobId: operationId }, 86_400_000);
    assert.equal(claim.kind, "claimed");
    return { ledger: deps.ledger, operationId };
  }

  /** Retries until the dead request's claim is stale (ACCEPT_TIMEOUT) and the retry takes it over. */
  const retried = (send: () => Promise<ApiResponse>) =>
    eventually(send, (r) => r.status !== 409, { timeoutMs: 15_000, intervalMs: 100, what: "the dead request's key to be taken over" });

  it("when a credit's money moved but its answer was never recorded (a crash), then the retry answers that credit, marked as a replay, and credits nothing more", async () => {
    const accountId = await account();
    const key = randomUUID();
    const { ledger, operationId } = await diedAfterTheMoney(accountId, key, "admin.credits", { accountId, amount: "5.00", reason: "crash" });
    assert.equal((await ledger.credit(accountId, pico("5.00"), undefined, operationId))?.balance, pico("15.00"));
    // Money moves after the crash too: the retry answers the figures of the credit's own entry.
    assert.equal((await credit(accountId, { amount: "1.00" })).status, 200);

    const retry = await retried(() => credit(accountId, { amount: "5.00", reason: "crash" }, key));
    assert.equal(retry.status, 200, retry.text);
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    assert.equal(retry.json.balance, "15.00");
    assertReplayOf(await credit(accountId, { amount: "5.00", reason: "crash" }, key), retry);

    assert.deepEqual(await statement(accountId), [["credit", "1.00", "16.00"], ["credit", "5.00", "15.00"], ["credit", "10.00", "10.00"]]);
    assert.equal(await balance(accountId), pico("16.00"));
    assert.equal((await auditKinds(accountId, "credit.added")).length, 1, "the retry writes no event (the dead request's went with its credit)");
  });

  it("when an adjustment's money moved but its answer was never recorded (a crash), then the retry answers that entry and debits nothing more", async () => {
    const accountId = await account();
    const key = randomUUID();
    const request = { accountId, amount: "-6.00", reason: "crash refund" };
    const { ledger, operationId } = await diedAfterTheMoney(accountId, key, "admin.adjustments", request);
    const made = await ledger.adjust(accountId, pico("-6.00"), "crash refund", undefined, operationId);
    assert.ok(typeof made === "object" && made.repeated === undefined);
    // Applied again, the debit would be refused (4.00 available): the retry must find the entry instead.
    const retry = await retried(() => adjust(accountId, { amount: "-6.00", reason: "crash refund" }, key));
    assert.equal(retry.status, 201, retry.text);
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    assert.equal(retry.json.balance, "4.00");
    assert.equal(retry.json.entry.entry_id, made.entry.seq.toString());
    assert.equal(retry.json.entry.amount, "-6.00");

    assert.deepEqual(await statement(accountId), [["adjustment", "-6.00", "4.00"], ["credit", "10.00", "10.00"]]);
    assert.equal(await balance(accountId), pico("4.00"));
    assert.equal((await auditKinds(accountId, "balance.adjusted")).length, 0);
  });

  it("when the ledger is given one operation id twice, then the second moves nothing and answers the first entry's figures", async () => {
    const accountId = await account();
    const ledger = service.running.core!.deps.ledger;
    const operationId = operationIdOf(accountId, randomUUID(), "admin.credits", { accountId, amount: "1.00", reason: "" });
    const [one, two] = await Promise.all([ledger.credit(accountId, pico("1.00"), undefined, operationId), ledger.credit(accountId, pico("1.00"), undefined, operationId)]);
    assert.deepEqual([one?.repeated, two?.repeated].sort(), [true, undefined], "one applied, one repeated (even in one round)");
    assert.deepEqual([one?.balance, two?.balance], [pico("11.00"), pico("11.00")]);
    assert.deepEqual(await statement(accountId), [["credit", "1.00", "11.00"], ["credit", "10.00", "10.00"]]);
  });
});
