// backends: embedded, real
/**
 * Issue 39, decision 0038: the low-balance alert. A hold that takes available below the threshold sends exactly one
 * signed balance.low event to the account webhook (checked with the standardwebhooks package, as receivers do); a
 * second hold while still below sends none; a credit back above re-arms it; crossing again sends a second one.
 * On both backends: SQLite's balance_alerts table, or Cassandra's money-row map found through balance_alert_pending.
 * GenerationService.GetBalance shows the threshold and the state (GET /api/v1/balance keeps its four fields).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Webhook } from "standardwebhooks";
import { call, eventually, startTestService, type TestService } from "../support/harness.js";
import { postGeneration, startLocalServer, type LocalServer } from "../support/jobs-api-helpers.js";
import * as grpc from "@grpc/grpc-js";
import { bearer, grpcAddress, loadGrpcPackage, unary } from "../support/rpc-helpers.js";

interface Received {
  readonly headers: Record<string, string>;
  readonly body: string;
}

let service: TestService;
let receiver: LocalServer;
const received: Received[] = [];

before(async () => {
  service = await startTestService({ SIMULATED_LATENCY_MS: "20000" });
  receiver = await startLocalServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      received.push({ headers: request.headers as Record<string, string>, body: Buffer.concat(chunks).toString("utf8") });
      response.writeHead(204).end();
    });
  });
});

after(async () => {
  await service?.close();
  await receiver?.close();
});

const lowEvents = () => received.filter((delivery) => JSON.parse(delivery.body).type === "balance.low");

describe("the low-balance alert", () => {
  it("when holds cross the threshold, then one signed balance.low per crossing reaches the webhook, re-armed by a credit above it", async () => {
    const accountId = (await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name: "low", balance: "1.00" } })).json.account_id as string;
    const webhook = await call(service, "PUT", `/admin/v1/accounts/${accountId}/webhook`, { admin: true, body: { url: `${receiver.url}/hooks` } });
    assert.equal(webhook.status, 200, webhook.text);
    const secret = webhook.json.secret as string;
    const set = await call(service, "PATCH", `/admin/v1/accounts/${accountId}`, { admin: true, body: { low_balance_threshold: "0.98" } });
    assert.deepEqual([set.json.low_balance_threshold, set.json.low_balance], ["0.98", false]);
    const key = (await call(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { models: ["*"] } })).json.api_key as string;
    const image = { model: "aimodel-2.5-flash-image", prompt: "a kite", aspect_ratio: "1:1" }; // holds 0.039; the jobs wait (long latency)

    assert.equal((await postGeneration(service, key, image)).status, 202); // available 0.961 < 0.98: crossed
    const [first] = await eventually(lowEvents, (events) => events.length === 1, { what: "the first balance.low" });
    const payload = new Webhook(secret).verify(first!.body, first!.headers) as { type: string; data: Record<string, string> };
    assert.equal(payload.type, "balance.low");
    assert.deepEqual([payload.data.account_id, payload.data.available, payload.data.threshold], [accountId, "0.961", "0.98"]);
    assert.ok(!Number.isNaN(Date.parse(payload.data.at)));
    assert.equal((await call(service, "GET", `/admin/v1/accounts/${accountId}`, { admin: true })).json.low_balance, true);
    const own = await call(service, "GET", "/api/v1/balance", { key });
    assert.equal(own.status, 200, own.text);
    assert.deepEqual(own.json, { balance: "1.00", reserved: "0.039", available: "0.961", currency: "USD" });
    const generation = new (loadGrpcPackage().GenerationService!)(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
    try {
      const answer = await unary<{ balance: { available: string }; lowBalanceThreshold: string; lowBalance: boolean }>(generation, "GetBalance", {}, bearer(key));
      assert.deepEqual([answer.balance.available, answer.lowBalanceThreshold, answer.lowBalance], ["0.961", "0.98", true]);
    } finally {
      generation.close();
    }

    assert.equal((await postGeneration(service, key, image)).status, 202); // 0.922, still below: no event
    const credit = await call(service, "POST", `/admin/v1/accounts/${accountId}/credits`, { admin: true, body: { amount: "1.00" } });
    assert.equal(credit.json.available, "1.922"); // back above: re-armed
    assert.equal((await call(service, "GET", `/admin/v1/accounts/${accountId}`, { admin: true })).json.low_balance, false);
    const rearmed = (await call(service, "GET", "/api/v1/balance", { key })).json;
    assert.equal(rearmed.available, "1.922");
    assert.equal(lowEvents().length, 1, "no event for the hold made while below, nor for the credit");

    const debit = await call(service, "POST", `/admin/v1/accounts/${accountId}/adjustments`, { admin: true, body: { amount: "-1.00", reason: "test debit" } });
    assert.equal(debit.json.available, "0.922"); // crossed again
    const events = await eventually(lowEvents, (all) => all.length === 2, { what: "the second balance.low" });
    const second = new Webhook(secret).verify(events[1]!.body, events[1]!.headers) as { data: Record<string, string> };
    assert.deepEqual([second.data.available, second.data.threshold], ["0.922", "0.98"]);
    assert.notEqual(events[0]!.headers["webhook-id"], events[1]!.headers["webhook-id"]);
    const deliveries = await call(service, "GET", `/admin/v1/accounts/${accountId}/balance`, { admin: true });
    assert.equal(deliveries.json.balance, "1.00"); // 1.00 + 1.00 − 1.00; the holds move reserved only
  });
});
