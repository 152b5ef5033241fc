// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import {
  call, createCustomer, finishedJob, startTestService, type Customer, type TestService,
} from "../support/harness.js";
import { probePng } from "../support/media-probe.js";
import { withReceiver, type Delivery } from "../support/webhook-receiver.js";

// Matches the harness's WEBHOOK_RETRY_SCHEDULE ("50ms,100ms,150ms"): a failing delivery makes 1 + 3 attempts.
const SCHEDULE_MS = [50, 100, 150];
// Longer than any gap between two attempts of one delivery, so silence this long means the dispatcher is done.
const QUIET_MS = 3 * SCHEDULE_MS.reduce((a, b) => a + b, 0);

async function setAccountWebhook(service: TestService, customer: Customer, url: string): Promise<string> {
  const response = await call(service, "PUT", `/admin/v1/accounts/${customer.accountId}/webhook`, { admin: true, body: { url } });
  assert.equal(response.status, 200, response.text);
  assert.equal(response.json.url, url);
  assert.match(response.json.secret, /^whsec_[A-Za-z0-9+/=]+$/);
  return response.json.secret;
}

async function createImageJob(service: TestService, customer: Customer, extra: Record<string, unknown> = {}): Promise<string> {
  const response = await call(service, "POST", "/api/v1/generations", {
    key: customer.apiKey,
    body: { model: "aimodel-3.1-flash-image", prompt: "a heron in the reeds", aspect_ratio: "16:9", resolution: "1K", ...extra },
  });
  assert.equal(response.status, 202, response.text);
  return response.json.job_id;
}

function verify(secret: string, delivery: Pick<Delivery, "body" | "headers">): unknown {
  return new Webhook(secret).verify(delivery.body, delivery.headers);
}

describe("webhooks: payload, target, signature, retries", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("posts a finished job exactly once with exactly job_id, status success, result and the request's metadata", async () => {
    await withReceiver(() => 200, async (receiver) => {
      const customer = await createCustomer(service, "1.00");
      await setAccountWebhook(service, customer, receiver.url);
      const metadata = { order: 42, tags: ["a", "b"], nested: { ok: true } };
      const jobId = await createImageJob(service, customer, { metadata });
      const [delivery] = await receiver.awaitJob(jobId);
      const payload = delivery!.json;
      assert.deepEqual(Object.keys(payload).sort(), ["job_id", "metadata", "result", "status"]);
      assert.equal(payload.job_id, jobId);
      assert.equal(payload.status, "success");
      assert.deepEqual(Object.keys(payload.result).sort(), ["image_url", "text"]);
      assert.equal(payload.result.text, null);
      assert.deepEqual(payload.metadata, metadata);
      for (const field of ["created_at", "started_at", "finished_at", "error", "usage"]) assert.equal(field in payload, false, field);
      assert.equal(delivery!.headers["content-type"]?.split(";")[0], "application/json");
      assert.equal((await finishedJob(service, customer.apiKey, jobId)).status, "done");

      // A later job reaching the same receiver shows the dispatcher moved on; the quiet period outlasts any retry.
      const laterId = await createImageJob(service, customer);
      await receiver.awaitJob(laterId);
      await receiver.quietFor(QUIET_MS);
      assert.equal(receiver.forJob(jobId).length, 1, "delivered exactly once");
      assert.equal(receiver.forJob(laterId).length, 1);
    });
  });

  it("delivers an image_url that downloads the generated PNG", async () => {
    await withReceiver(() => 200, async (receiver) => {
      const customer = await createCustomer(service, "1.00");
      await setAccountWebhook(service, customer, receiver.url);
      const jobId = await createImageJob(service, customer);
      const [delivery] = await receiver.awaitJob(jobId);
      const image = await fetch(delivery!.json.result.image_url);
      assert.equal(image.status, 200);
      assert.equal(image.headers.get("content-type"), "image/png");
      assert.deepEqual(probePng(new Uint8Array(await image.arrayBuffer())), { width: 1024, height: 576 });
    });
  });

  it("posts a failed job with status failed, the error code, null metadata and no result", async () => {
    await withReceiver(() => 200, async (receiver) => {
      const customer = await createCustomer(service, "1.00");
      await setAccountWebhook(service, customer, receiver.url);
      const jobId = await createImageJob(service, customer, { prompt: "a heron [simulate:fail]" });
      const [delivery] = await receiver.awaitJob(jobId);
      assert.deepEqual(delivery!.json, { job_id: jobId, status: "failed", error: "generation_failed", metadata: null });
      assert.equal((await finishedJob(service, customer.apiKey, jobId)).status, "failed");
    });
  });

  it("sends a job with callback_url only there, not to the account webhook", async () => {
    await withReceiver(() => 200, async (account) => {
      await withReceiver(() => 200, async (callback) => {
        const customer = await createCustomer(service, "1.00");
        const secret = await setAccountWebhook(service, customer, account.url);
        const overridden = await createImageJob(service, customer, { callback_url: callback.url, metadata: { via: "callback" } });
        const [delivery] = await callback.awaitJob(overridden);
        assert.equal(delivery!.json.status, "success");
        assert.deepEqual(delivery!.json.metadata, { via: "callback" });
        verify(secret, delivery!);

        // The account receiver does get a job without callback_url, so its silence about the first is meaningful.
        const plain = await createImageJob(service, customer);
        await account.awaitJob(plain);
        await account.quietFor(QUIET_MS);
        assert.equal(account.forJob(overridden).length, 0, "the account webhook got the overridden job");
        assert.equal(callback.forJob(plain).length, 0, "the callback receiver got another job");
        assert.equal(callback.forJob(overridden).length, 1);
      });
    });
  });

  it("signs deliveries per Standard Webhooks with the account secret, and a tampered delivery fails verification", async () => {
    await withReceiver(() => 200, async (receiver) => {
      const customer = await createCustomer(service, "1.00");
      const secret = await setAccountWebhook(service, customer, receiver.url);
      // Setting the URL again keeps the secret, so receivers need not be reconfigured.
      assert.equal(await setAccountWebhook(service, customer, receiver.url), secret);
      const jobId = await createImageJob(service, customer, { metadata: { k: "v" } });
      const [delivery] = await receiver.awaitJob(jobId);
      const { headers } = delivery!;
      assert.match(headers["webhook-id"]!, /\S/);
      assert.match(headers["webhook-timestamp"]!, /^\d+$/);
      assert.ok(Math.abs(Number(headers["webhook-timestamp"]) - Date.now() / 1000) < 60, "timestamp is current");
      assert.match(headers["webhook-signature"]!, /^v1,[A-Za-z0-9+/]+=*$/);
      assert.deepEqual(verify(secret, delivery!), delivery!.json);

      const tamperedBody = delivery!.body.replace('"success"', '"failed"');
      assert.notEqual(tamperedBody, delivery!.body);
      assert.throws(() => verify(secret, { ...delivery!, body: tamperedBody }), WebhookVerificationError);
      assert.throws(() => verify(secret, { ...delivery!, body: `${delivery!.body} ` }), WebhookVerificationError);
      assert.throws(
        () => verify(secret, { ...delivery!, headers: { ...headers, "webhook-id": `${headers["webhook-id"]}x` } }),
        WebhookVerificationError,
      );
      const otherSecret = await setAccountWebhook(service, await createCustomer(service, "0.00"), receiver.url);
      assert.notEqual(otherSecret, secret, "secrets are per account");
      assert.throws(() => verify(otherSecret, delivery!), WebhookVerificationError);
    });
  });

  it("retries after two 500s, stops at the first 2xx (3 attempts) and keeps webhook-id across attempts", async () => {
    await withReceiver((_, attempt) => (attempt <= 2 ? 500 : 200), async (receiver) => {
      const customer = await createCustomer(service, "1.00");
      const secret = await setAccountWebhook(service, customer, receiver.url);
      const jobId = await createImageJob(service, customer);
      const attempts = await receiver.awaitJob(jobId, 3);
      assert.equal(new Set(attempts.map((a) => a.headers["webhook-id"])).size, 1, "webhook-id stable across retries");
      for (const attempt of attempts) {
        verify(secret, attempt);
        assert.equal(attempt.json.job_id, jobId);
        assert.equal(attempt.json.status, "success");
      }
      // Backoff follows the schedule (a little slack for timer granularity).
      assert.ok(attempts[1]!.at - attempts[0]!.at >= SCHEDULE_MS[0]! - 10, "first retry came too early");
      assert.ok(attempts[2]!.at - attempts[1]!.at >= SCHEDULE_MS[1]! - 10, "second retry came too early");

      const laterId = await createImageJob(service, customer);
      await receiver.awaitJob(laterId);
      await receiver.quietFor(QUIET_MS);
      assert.equal(receiver.forJob(jobId).length, 3, "no attempt after the 2xx");
    });
  });

  it("gives up after 1 + schedule length attempts when the receiver always answers 500", async () => {
    await withReceiver((delivery) => (delivery.json?.metadata?.doomed ? 500 : 200), async (receiver) => {
      const customer = await createCustomer(service, "1.00");
      await setAccountWebhook(service, customer, receiver.url);
      const jobId = await createImageJob(service, customer, { metadata: { doomed: true } });
      const attempts = await receiver.awaitJob(jobId, 1 + SCHEDULE_MS.length);
      assert.equal(new Set(attempts.map((a) => a.headers["webhook-id"])).size, 1);

      const laterId = await createImageJob(service, customer);
      await receiver.awaitJob(laterId);
      await receiver.quietFor(QUIET_MS);
      assert.equal(receiver.forJob(jobId).length, 1 + SCHEDULE_MS.length);
      assert.equal(receiver.forJob(laterId).length, 1);
    });
  });
});

describe("webhooks: a receiver that never answers (WEBHOOK_TIMEOUT=200ms)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ WEBHOOK_TIMEOUT: "200ms" });
  });
  after(() => service.close());

  it("counts a timed-out attempt as a failure and retries it", async () => {
    await withReceiver((_, attempt) => (attempt === 1 ? "hang" : 200), async (receiver) => {
      const customer = await createCustomer(service, "1.00");
      const secret = await setAccountWebhook(service, customer, receiver.url);
      const jobId = await createImageJob(service, customer);
      const attempts = await receiver.awaitJob(jobId, 2);
      assert.equal(attempts[0]!.headers["webhook-id"], attempts[1]!.headers["webhook-id"]);
      verify(secret, attempts[1]!);
      assert.ok(attempts[1]!.at - attempts[0]!.at >= 200 + SCHEDULE_MS[0]! - 20, "the retry waited for the timeout and the backoff");
      await receiver.quietFor(QUIET_MS + 200);
      assert.equal(receiver.forJob(jobId).length, 2, "no attempt after the answered retry");
    });
  });
});

describe("webhooks: ALLOW_PRIVATE_URLS=false", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ ALLOW_PRIVATE_URLS: "false" });
  });
  after(() => service.close());

  it("never delivers to a loopback callback_url, while the job itself is done", async () => {
    await withReceiver(() => 200, async (receiver) => {
      const customer = await createCustomer(service, "1.00");
      const jobId = await createImageJob(service, customer, { callback_url: receiver.url });
      const job = await finishedJob(service, customer.apiKey, jobId);
      assert.equal(job.status, "done");
      // Silence must outlast the first attempt plus every retry of the schedule.
      await receiver.quietFor(QUIET_MS + 500, Date.now());
      assert.equal(receiver.deliveries.length, 0, "a loopback receiver was called");
    });
  });
});
