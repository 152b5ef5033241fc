// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Webhook } from "standardwebhooks";
import { ADMIN_TOKEN, call, createCustomer, eventually, finishedJob, startTestService, type TestService } from "../support/harness.js";
import { ownerToken, reasonOf, rpc, signIn } from "../support/panel-helpers.js";
import { withReceiver, type Delivery } from "../support/webhook-receiver.js";

/**
 * Issue 11: the account-wide webhook as its owner manages it (AccountService),
 * and the operator's dead letters (AdminService), against a receiver on
 * loopback. The harness retries a failing delivery 3 times (50, 100, 150 ms).
 */

/** Standard Webhooks verification of what the receiver got, with a given secret. */
function verifies(delivery: Delivery, secret: string): boolean {
  try {
    new Webhook(secret).verify(delivery.body, delivery.headers);
    return true;
  } catch {
    return false;
  }
}

describe("the account's webhook through AccountService", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service?.close());

  async function owner() {
    const customer = await createCustomer(service, "5.00");
    const { token } = await ownerToken(service, customer.accountId);
    const session = await signIn(service, token);
    return { customer, token, as: { cookie: session.cookie, "x-csrf-token": session.csrf } };
  }

  it("when the owner sets the URL and sends a test event, then the receiver gets it signed with the secret the owner sees, and it is listed with its status code", async () => {
    await withReceiver(() => 204, async (receiver) => {
      const { customer, as } = await owner();
      const none = await rpc(service, "AccountService/SendTestWebhook", {}, as);
      assert.equal(reasonOf(none.json), "webhook_url_not_set");
      const bad = await rpc(service, "AccountService/SetAccountWebhook", { url: "ftp://x" }, as);
      assert.equal(reasonOf(bad.json), "invalid_url");

      const set = await rpc(service, "AccountService/SetAccountWebhook", { url: receiver.url }, as);
      assert.equal(set.status, 200, set.text);
      const { webhook } = (await rpc(service, "AccountService/GetAccountWebhook", {}, as)).json;
      assert.equal(webhook.url, receiver.url);
      assert.equal(webhook.secret, set.json.webhook.secret);

      const sent = await rpc(service, "AccountService/SendTestWebhook", {}, as);
      assert.equal(sent.status, 200, sent.text);
      assert.equal(sent.json.delivery.state, "WEBHOOK_DELIVERY_STATE_DELIVERED");
      assert.equal(sent.json.delivery.attempts[0].statusCode, 204);
      const [arrived] = receiver.deliveries;
      assert.ok(arrived && verifies(arrived, webhook.secret), "signed with the account's secret");
      assert.equal(arrived.json.type, "webhook.test");
      assert.equal(arrived.json.account_id, customer.accountId);
      assert.equal(arrived.headers["webhook-id"], sent.json.delivery.messageId);

      const listed = await rpc(service, "AccountService/ListWebhookDeliveries", {}, as);
      assert.deepEqual(listed.json.deliveries.map((d: any) => [d.messageId, d.jobId ?? "", d.attempts[0].statusCode]), [[sent.json.delivery.messageId, "", 204]]);

      // A new secret signs from the next request on; the old one no longer verifies.
      const rotated = await rpc(service, "AccountService/RotateWebhookSecret", {}, as);
      assert.notEqual(rotated.json.webhook.secret, webhook.secret);
      await rpc(service, "AccountService/SendTestWebhook", {}, as);
      const second = receiver.deliveries[1]!;
      assert.ok(verifies(second, rotated.json.webhook.secret));
      assert.equal(verifies(second, webhook.secret), false);
    });
  });

  it("when a job's delivery exhausts its retries, then the operator sees it among the dead letters, and the owner's redelivery (same webhook-id) delivers it and takes it out", async () => {
    let failing = true;
    await withReceiver(() => (failing ? 500 : 200), async (receiver) => {
      const { customer, token, as } = await owner();
      await rpc(service, "AccountService/SetAccountWebhook", { url: receiver.url }, as);
      const job = await call(service, "POST", "/api/v1/generations", { key: token, body: { model: "aimodel-2.5-flash-image", prompt: "a kite" } });
      assert.equal(job.status, 202, job.text);
      const jobId = job.json.job_id;
      await finishedJob(service, token, jobId);
      await receiver.awaitJob(jobId, 4);
      const asAdmin = { authorization: `Bearer ${ADMIN_TOKEN}` };
      const dead = await eventually(
        async () => ((await rpc(service, "AdminService/ListWebhookDeadLetters", { limit: 100 }, asAdmin)).json.deliveries ?? []).filter((d: any) => d.jobId === jobId),
        (list: any[]) => list.length === 1,
        { what: "the dead letter" },
      );
      assert.equal(dead[0].accountId, customer.accountId);
      assert.deepEqual(dead[0].attempts.map((a: any) => a.statusCode), [500, 500, 500, 500]);
      const listed = (await rpc(service, "AccountService/ListWebhookDeliveries", {}, as)).json.deliveries;
      assert.equal(listed[0].state, "WEBHOOK_DELIVERY_STATE_EXHAUSTED");

      const other = await owner();
      const foreign = await rpc(service, "AccountService/RedeliverWebhook", { messageId: dead[0].messageId }, other.as);
      assert.equal(foreign.status, 404);
      assert.equal(reasonOf(foreign.json), "webhook_delivery_not_found");

      failing = false;
      const again = await rpc(service, "AccountService/RedeliverWebhook", { messageId: dead[0].messageId }, as);
      assert.equal(again.status, 200, again.text);
      assert.equal(again.json.delivery.state, "WEBHOOK_DELIVERY_STATE_DELIVERED");
      assert.equal(again.json.delivery.attempts.at(-1).statusCode, 200);
      const copies = receiver.forJob(jobId);
      assert.equal(copies.length, 5);
      assert.equal(new Set(copies.map((d) => d.headers["webhook-id"])).size, 1, "the same webhook-id every time");
      assert.equal(copies.at(-1)!.json.status, "success");
      const after = (await rpc(service, "AdminService/ListWebhookDeadLetters", { limit: 100 }, asAdmin)).json.deliveries ?? [];
      assert.equal(after.some((d: any) => d.jobId === jobId), false, "no longer a dead letter");
    });
  });

  it("when a listing asks for more than 100 or less than 1, then it is 400 invalid_limit", async () => {
    const { as } = await owner();
    for (const limit of [0, 101]) {
      const refused = await rpc(service, "AccountService/ListWebhookDeliveries", { limit }, as);
      assert.equal(reasonOf(refused.json), "invalid_limit", refused.text);
    }
  });
});
