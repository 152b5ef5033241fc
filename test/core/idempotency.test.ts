// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import {
  call, createCustomer, eventually, finishedJob, pico, startTestService, type ApiResponse, type TestService,
} from "../support/harness.js";
import { checkedBalance } from "../support/billing-helpers.js";

const PRICE = "0.067"; // aimodel-3.1-flash-image at 1K
const body = (prompt = "a paper boat") => ({ model: "aimodel-3.1-flash-image", prompt, aspect_ratio: "1:1", resolution: "1K" });

function create(service: TestService, apiKey: string, idempotencyKey: string, requestBody: unknown = body()) {
  return call(service, "POST", "/api/v1/generations", {
    key: apiKey, body: requestBody, headers: { "idempotency-key": idempotencyKey },
  });
}

function assertFresh(response: ApiResponse) {
  assert.equal(response.status, 202, response.text);
  assert.equal(response.headers.get("idempotent-replayed"), null, "a new job is not marked as a replay");
}

function assertReplayOf(response: ApiResponse, original: ApiResponse) {
  assert.equal(response.status, 202, response.text);
  assert.equal(response.headers.get("idempotent-replayed"), "true");
  assert.deepEqual(response.json, original.json, "a replay returns the original 202 body");
  assert.equal(response.headers.get("location"), original.headers.get("location"));
}

/** Waits for every job, then checks the account paid for exactly `count` of them. */
async function assertCharged(service: TestService, apiKey: string, jobIds: string[], opening: string, count: number, price = PRICE) {
  for (const id of jobIds) assert.equal((await finishedJob(service, apiKey, id)).status, "done");
  const final = await checkedBalance(service, apiKey);
  assert.equal(pico(final.reserved), 0n);
  assert.equal(pico(final.balance), pico(opening) - BigInt(count) * pico(price), `balance ${final.balance}`);
}

describe("Idempotency-Key on job creation", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("replays the original 202 with Idempotent-Replayed: true for the same key and body, and charges once", async () => {
    const customer = await createCustomer(service, "1.00");
    const key = randomUUID();
    const first = await create(service, customer.apiKey, key);
    assertFresh(first);
    const second = await create(service, customer.apiKey, key);
    assertReplayOf(second, first);
    await finishedJob(service, customer.apiKey, first.json.job_id);
    // A replay after the job finished still answers the original acceptance, not a new job.
    const third = await create(service, customer.apiKey, key);
    assertReplayOf(third, first);
    await assertCharged(service, customer.apiKey, [first.json.job_id], "1.00", 1);
  });

  it("treats a body with the same fields in another order as the same request", async () => {
    const customer = await createCustomer(service, "1.00");
    const key = randomUUID();
    const first = await create(service, customer.apiKey, key, body());
    assertFresh(first);
    const { resolution, aspect_ratio, prompt, model } = body();
    const reordered = await create(service, customer.apiKey, key, { resolution, aspect_ratio, prompt, model });
    assertReplayOf(reordered, first);
  });

  it("rejects the same key with a different body with 422 idempotency_key_reused and keeps the original", async () => {
    const customer = await createCustomer(service, "1.00");
    const key = randomUUID();
    const first = await create(service, customer.apiKey, key, body("first prompt"));
    assertFresh(first);
    const reused = await create(service, customer.apiKey, key, body("another prompt"));
    assert.equal(reused.status, 422, reused.text);
    assert.equal(reused.json.error.code, "idempotency_key_reused");
    assertReplayOf(await create(service, customer.apiKey, key, body("first prompt")), first);
    await assertCharged(service, customer.apiKey, [first.json.job_id], "1.00", 1);
  });

  it("scopes keys per account: another account using the same key gets its own job", async () => {
    const alice = await createCustomer(service, "1.00");
    const bob = await createCustomer(service, "1.00");
    const key = randomUUID();
    const a = await create(service, alice.apiKey, key);
    const b = await create(service, bob.apiKey, key);
    assertFresh(a);
    assertFresh(b);
    assert.notEqual(a.json.job_id, b.json.job_id);
    // Each account sees only its own job.
    assert.equal((await call(service, "GET", `/api/v1/jobs/${a.json.job_id}`, { key: bob.apiKey })).status, 404);
    await assertCharged(service, alice.apiKey, [a.json.job_id], "1.00", 1);
    await assertCharged(service, bob.apiKey, [b.json.job_id], "1.00", 1);
  });

  it("treats an RFC 8941 quoted key as the bare key", async () => {
    const customer = await createCustomer(service, "1.00");
    const bare = `abc-${randomUUID()}`;
    const first = await create(service, customer.apiKey, `"${bare}"`);
    assertFresh(first);
    assertReplayOf(await create(service, customer.apiKey, bare), first);
    assertReplayOf(await create(service, customer.apiKey, `"${bare}"`), first);
    await assertCharged(service, customer.apiKey, [first.json.job_id], "1.00", 1);
  });

  it("creates one job and charges once for 20 parallel requests with one key; the rest replay or get 409 with Retry-After", async () => {
    const customer = await createCustomer(service, "1.00");
    const key = randomUUID();
    const responses = await Promise.all(Array.from({ length: 20 }, () => create(service, customer.apiKey, key)));
    const accepted = responses.filter((r) => r.status === 202);
    const conflicts = responses.filter((r) => r.status === 409);
    assert.equal(accepted.length + conflicts.length, 20, `statuses: ${responses.map((r) => r.status).join(",")}`);
    assert.ok(accepted.length >= 1);
    const ids = new Set(accepted.map((r) => r.json.job_id));
    assert.equal(ids.size, 1, `job ids: ${[...ids].join(", ")}`);
    assert.equal(accepted.filter((r) => r.headers.get("idempotent-replayed") === null).length, 1, "exactly one response created the job");
    for (const r of conflicts) {
      assert.equal(r.json.error.code, "idempotency_key_in_use");
      assert.match(r.headers.get("retry-after") ?? "", /^[1-9]\d*$/);
    }
    const [jobId] = [...ids];
    assert.equal((await create(service, customer.apiKey, key)).json.job_id, jobId);
    await assertCharged(service, customer.apiKey, [jobId!], "1.00", 1);
  });

  it("does not consume the key on 402: after funding, the same key creates a new job", async () => {
    const customer = await createCustomer(service, "0.00");
    const key = randomUUID();
    const refused = await create(service, customer.apiKey, key);
    assert.equal(refused.status, 402, refused.text);
    assert.equal(refused.json.error.code, "insufficient_funds");
    const credited = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { admin: true, body: { amount: "1.00" } });
    assert.equal(credited.status, 200);
    const retried = await create(service, customer.apiKey, key);
    assertFresh(retried);
    assertReplayOf(await create(service, customer.apiKey, key), retried);
    await assertCharged(service, customer.apiKey, [retried.json.job_id], "1.00", 1);
  });

  it("does not consume the key on a 422 validation failure", async () => {
    const customer = await createCustomer(service, "1.00");
    const key = randomUUID();
    const invalid = await create(service, customer.apiKey, key, { ...body(), aspect_ratio: "7:3" });
    assert.equal(invalid.status, 422, invalid.text);
    assert.equal(invalid.json.error.code, "unsupported_aspect_ratio");
    const valid = await create(service, customer.apiKey, key);
    assertFresh(valid);
    assertReplayOf(await create(service, customer.apiKey, key), valid);
    await assertCharged(service, customer.apiKey, [valid.json.job_id], "1.00", 1);
  });

  it("honours Idempotency-Key on the interactions endpoint and charges the video once", async () => {
    const customer = await createCustomer(service, "5.00");
    const key = randomUUID();
    const interaction = (prompt: string) =>
      call(service, "POST", "/api/aimodel/v1beta/interactions", {
        vendorKey: customer.apiKey,
        headers: { "idempotency-key": key },
        body: { model: "videomodel-3.1-generate-001", instances: [{ prompt }], parameters: { durationSeconds: 2 } },
      });
    const first = await interaction("a kite in the wind");
    assertFresh(first);
    assertReplayOf(await interaction("a kite in the wind"), first);
    const reused = await interaction("a different kite");
    // The vendor's error shape; the interactions endpoint makes a job, so its validation is the spec's 422.
    assert.equal(reused.status, 422, reused.text);
    assert.equal(reused.json.error.code, 422);
    assert.equal(reused.json.error.status, "INVALID_ARGUMENT");
    assert.equal(reused.json.error.details[0].reason, "IDEMPOTENCY_KEY_REUSED");
    // The interactions endpoint renders 720p: 2 s × 0.40.
    await assertCharged(service, customer.apiKey, [first.json.job_id], "5.00", 1, "0.80");
  });
});

describe("Idempotency-Key expiry (IDEMPOTENCY_TTL=3s)", () => {
  let service: TestService;
  before(async () => {
    // Long enough that the immediate replay still falls inside it on the slower real backend.
    service = await startTestService({ IDEMPOTENCY_TTL: "3s" });
  });
  after(() => service.close());

  it("creates a new job with the same key once the key has expired", async () => {
    const customer = await createCustomer(service, "1.00");
    const key = randomUUID();
    const first = await create(service, customer.apiKey, key);
    assertFresh(first);
    assertReplayOf(await create(service, customer.apiKey, key), first);
    const later = await eventually(
      () => create(service, customer.apiKey, key),
      (r) => r.status !== 202 || r.json.job_id !== first.json.job_id,
      { timeoutMs: 10_000, intervalMs: 100, what: "the idempotency key to expire" },
    );
    assertFresh(later);
    assert.notEqual(later.json.job_id, first.json.job_id);
    await assertCharged(service, customer.apiKey, [first.json.job_id, later.json.job_id], "1.00", 2);
  });
});

describe("Idempotency-Key replays answer only a key that may make the request", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  async function keyOf(accountId: string, fields: Record<string, unknown>): Promise<string> {
    const created = await call(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { models: ["*"], ...fields } });
    assert.equal(created.status, 201, created.text);
    return created.json.api_key as string;
  }

  async function assertNothingMoved(apiKey: string, jobId: string) {
    const job = await finishedJob(service, apiKey, jobId);
    assert.equal(job.status, "done");
    const final = await checkedBalance(service, apiKey);
    assert.equal(pico(final.reserved), 0n);
    assert.equal(pico(final.balance), pico("1.00") - pico(PRICE), "only the original job was charged");
  }

  it("when another key of the same account with the grant sends the same key and body, then it gets the same job replayed (keys are scoped to the account)", async () => {
    const customer = await createCustomer(service, "1.00");
    const sibling = await keyOf(customer.accountId, {});
    const key = randomUUID();
    const first = await create(service, customer.apiKey, key);
    assertFresh(first);
    assertReplayOf(await create(service, sibling, key), first);
    await assertCharged(service, customer.apiKey, [first.json.job_id], "1.00", 1);
  });

  it("when a key without a grant for the model replays another key's Idempotency-Key, then it gets 403 model_not_permitted, as a new request would", async () => {
    const customer = await createCustomer(service, "1.00");
    const ungranted = await keyOf(customer.accountId, { models: ["aimodel-2.5-flash-image"] });
    const key = randomUUID();
    const first = await create(service, customer.apiKey, key);
    assertFresh(first);
    const replay = await create(service, ungranted, key);
    assert.equal(replay.status, 403, replay.text);
    assert.equal(replay.json.error.code, "model_not_permitted");
    assert.equal(replay.headers.get("idempotent-replayed"), null);
    await assertNothingMoved(customer.apiKey, first.json.job_id);
  });

  it("when a key with a spend limit of 0 replays another key's Idempotency-Key, then it gets 402 key_spend_limit_exceeded, as a new request would", async () => {
    const customer = await createCustomer(service, "1.00");
    const limited = await keyOf(customer.accountId, { spend_limit: "0" });
    const key = randomUUID();
    const first = await create(service, customer.apiKey, key);
    assertFresh(first);
    const replay = await create(service, limited, key);
    assert.equal(replay.status, 402, replay.text);
    assert.equal(replay.json.error.code, "key_spend_limit_exceeded");
    await assertNothingMoved(customer.apiKey, first.json.job_id);
  });

  it("when the model is paused, then a replay of its Idempotency-Key gets 503 model_paused, as a new request would, and the job again once unpaused", async () => {
    const customer = await createCustomer(service, "1.00");
    const key = randomUUID();
    const first = await create(service, customer.apiKey, key);
    assertFresh(first);
    const pause = (paused: boolean) => call(service, "PUT", "/admin/v1/models/aimodel-3.1-flash-image/pause", { admin: true, body: { paused } });
    assert.equal((await pause(true)).status, 200);
    try {
      const replay = await create(service, customer.apiKey, key);
      assert.equal(replay.status, 503, replay.text);
      assert.equal(replay.json.error.code, "model_paused");
    } finally {
      assert.equal((await pause(false)).status, 200);
    }
    assertReplayOf(await create(service, customer.apiKey, key), first);
  });
});
