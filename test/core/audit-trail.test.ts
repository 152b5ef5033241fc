// backends: embedded, real
/**
 * The audit trail (issue 39): each audited change leaves exactly one event, written with the change, saying who
 * (admin, owner:<account>), when, from which client address, and the values before and after (never a secret); a
 * refused change leaves none. The operator lists every event (GET /admin/v1/audit, AdminService.ListAuditEvents),
 * filtered and paged; an owner lists its own account's only (AccountService.ListAuditEvents). Both backends.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { call, createCustomer, startTestService, ADMIN_TOKEN, type ApiResponse, type TestService } from "../support/harness.js";
import { ownerToken, reasonOf, rpc } from "../support/panel-helpers.js";
import { bearer, grpcAddress, loadGrpcPackage, rpcError, unary } from "../support/rpc-helpers.js";
import type { AuditEventJson } from "../support/audit-events.js";

let service: TestService;

before(async () => {
  service = await startTestService();
});

after(async () => {
  await service?.close();
});


/** The operator's listing with these query parameters (every page when `all`). */
async function audit(query: Record<string, string>, all = true): Promise<AuditEventJson[]> {
  const events: AuditEventJson[] = [];
  let token: string | null = null;
  do {
    const params: URLSearchParams = new URLSearchParams({ ...query, ...(token ? { page_token: token } : {}) });
    const response: ApiResponse = await call(service, "GET", `/admin/v1/audit?${params}`, { admin: true });
    assert.equal(response.status, 200, response.text);
    events.push(...(response.json.events as AuditEventJson[]));
    token = all ? response.json.next_page_token : null;
  } while (token);
  return events;
}

const LOOPBACK = /^(::ffff:)?127\.0\.0\.1$/;

describe("the audit trail", () => {
  it("when the operator pauses and resumes the project and a model, then each change leaves one event with actor, address, before and after", async () => {
    const since = new Date().toISOString();
    assert.equal((await call(service, "PUT", "/admin/v1/pause", { admin: true, body: { paused: true } })).status, 200);
    assert.equal((await call(service, "PUT", "/admin/v1/pause", { admin: true, body: { paused: false } })).status, 200);
    const model = "aimodel-2.5-flash-image";
    assert.equal((await call(service, "PUT", `/admin/v1/models/${model}/pause`, { admin: true, body: { paused: true } })).status, 200);

    const project = await audit({ kind: "project.paused", from: since });
    assert.deepEqual(project.map((event) => [event.before, event.after]), [['{"paused":true}', '{"paused":false}'], ['{"paused":false}', '{"paused":true}']]);
    for (const event of project) {
      assert.equal(event.actor, "admin");
      assert.match(event.client_address, LOOPBACK);
      assert.equal(event.account_id, null);
      assert.ok(Date.parse(event.created_at) >= Date.parse(since));
    }
    const paused = await audit({ kind: "model.paused", from: since });
    assert.equal(paused.length, 1);
    assert.deepEqual([paused[0]!.subject, paused[0]!.before, paused[0]!.after, paused[0]!.actor], [model, '{"paused":false}', '{"paused":true}', "admin"]);
    assert.equal((await call(service, "PUT", `/admin/v1/models/${model}/pause`, { admin: true, body: { paused: false } })).status, 200);
    assert.equal((await audit({ kind: "model.paused", from: since })).length, 2);
  });

  it("when a change is refused, then it leaves no event", async () => {
    const customer = await createCustomer(service, "1.00");
    const { token } = await ownerToken(service, customer.accountId);
    const since = new Date().toISOString();
    const unknownModel = await call(service, "PUT", "/admin/v1/models/no-such-model/pause", { admin: true, body: { paused: true } });
    assert.equal(unknownModel.status, 404, unknownModel.text);
    const unknownRoute = await call(service, "PUT", "/admin/v1/routes/no-such-route/pause", { admin: true, body: { paused: true } });
    assert.equal(unknownRoute.status, 404, unknownRoute.text);
    const badUrl = await call(service, "PUT", `/admin/v1/accounts/${customer.accountId}/webhook`, { admin: true, body: { url: "ftp://x" } });
    assert.equal(badUrl.status, 422, badUrl.text);
    const ownerBad = await rpc(service, "AccountService/SetAccountWebhook", { url: "ftp://x" }, { authorization: `Bearer ${token}` });
    assert.equal(ownerBad.status, 400, ownerBad.text);
    const notAdmin = await call(service, "PUT", "/admin/v1/pause", { key: customer.apiKey, body: { paused: true } });
    assert.equal(notAdmin.status, 401, notAdmin.text);
    assert.deepEqual(await audit({ from: since, account_id: customer.accountId }), []);
    assert.deepEqual((await audit({ from: since })).filter((event) => event.kind !== "webhook.set" || event.account_id === customer.accountId), []);
  });

  it("when an owner sets its webhook and rotates its secret, then both are recorded as the owner's, the secret as changed only", async () => {
    const customer = await createCustomer(service, "1.00");
    const { token } = await ownerToken(service, customer.accountId);
    const as = { authorization: `Bearer ${token}` };
    const set = await rpc(service, "AccountService/SetAccountWebhook", { url: "https://example.test/hook" }, as);
    assert.equal(set.status, 200, set.text);
    const rotated = await rpc(service, "AccountService/RotateWebhookSecret", {}, as);
    assert.equal(rotated.status, 200, rotated.text);
    const secret = rotated.json.webhook.secret as string;
    const byAdmin = await call(service, "PUT", `/admin/v1/accounts/${customer.accountId}/webhook`, { admin: true, body: { url: "" } });
    assert.equal(byAdmin.status, 200, byAdmin.text);

    const events = (await audit({ account_id: customer.accountId })).filter((event) => event.kind.startsWith("webhook."));
    assert.deepEqual(events.map((event) => [event.kind, event.actor, event.before, event.after]), [
      ["webhook.set", "admin", '{"url":"https://example.test/hook"}', '{"url":""}'],
      ["webhook.secret_rotated", `owner:${customer.accountId}`, null, '{"secret":"changed"}'],
      ["webhook.set", `owner:${customer.accountId}`, '{"url":""}', '{"url":"https://example.test/hook"}'],
    ]);
    for (const event of events) {
      assert.match(event.client_address, LOOPBACK);
      assert.equal(event.account_id, customer.accountId);
      assert.ok(!JSON.stringify(event).includes(secret.slice(6)), "no secret is recorded");
    }
    const own = await rpc(service, "AccountService/ListAuditEvents", { query: {} }, as);
    assert.equal(own.status, 200, own.text);
    const ownWebhook = own.json.events.filter((event: { kind: string }) => event.kind.startsWith("webhook."));
    assert.deepEqual(ownWebhook.map((event: { eventId: string }) => event.eventId), events.map((event) => event.event_id));
  });

  it("when an owner asks for another account's events, then it is refused, and its own listing never shows another account's", async () => {
    const mine = await createCustomer(service, "1.00");
    const theirs = await createCustomer(service, "1.00");
    const { token } = await ownerToken(service, mine.accountId);
    const { token: theirToken } = await ownerToken(service, theirs.accountId);
    const set = await rpc(service, "AccountService/SetAccountWebhook", { url: "https://theirs.test/" }, { authorization: `Bearer ${theirToken}` });
    assert.equal(set.status, 200, set.text);
    const refused = await rpc(service, "AccountService/ListAuditEvents", { query: { accountId: theirs.accountId } }, { authorization: `Bearer ${token}` });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(reasonOf(refused.json), "not_your_account");
    const own = await rpc(service, "AccountService/ListAuditEvents", { query: {} }, { authorization: `Bearer ${token}` });
    assert.equal(own.status, 200, own.text);
    // Its own: the owner token and the key its account was opened with, never the other account's webhook.
    assert.deepEqual((own.json.events ?? []).map((event: { kind: string; accountId: string }) => [event.kind, event.accountId]), [
      ["owner_token.created", mine.accountId], ["key.created", mine.accountId],
    ]);
    const asKey = await rpc(service, "AccountService/ListAuditEvents", { query: {} }, { authorization: `Bearer ${mine.apiKey}` });
    assert.equal(asKey.status, 403, asKey.text);
  });

  it("when events are listed with filters and small pages, then each page continues the last and the filters hold, over REST and gRPC", async () => {
    const customer = await createCustomer(service, "1.00");
    const urls = ["https://a.test/", "https://b.test/", "https://c.test/", "https://d.test/", "https://e.test/"];
    for (const url of urls) {
      const set = await call(service, "PUT", `/admin/v1/accounts/${customer.accountId}/webhook`, { admin: true, body: { url } });
      assert.equal(set.status, 200, set.text);
    }
    const whole = await audit({ account_id: customer.accountId, kind: "webhook.set" });
    assert.deepEqual(whole.map((event) => JSON.parse(event.after!).url), [...urls].reverse());
    const paged = await audit({ account_id: customer.accountId, kind: "webhook.set", limit: "2" });
    assert.deepEqual(paged.map((event) => event.event_id), whole.map((event) => event.event_id));
    assert.deepEqual(await audit({ account_id: customer.accountId, actor: "owner:nobody" }), []);
    assert.deepEqual(await audit({ account_id: customer.accountId, kind: "webhook.secret_rotated" }), []);
    const third = whole[2]!.created_at;
    const older = await audit({ account_id: customer.accountId, kind: "webhook.set", to: third });
    assert.ok(older.every((event) => Date.parse(event.created_at) < Date.parse(third)));
    assert.ok(older.length >= 1 && older.length <= 2);
    const bad = await call(service, "GET", "/admin/v1/audit?from=2020-01-01T00:00:00Z&to=2021-01-01T00:00:00Z", { admin: true });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.json.error.code, "invalid_time_range");
    const forged = await call(service, "GET", `/admin/v1/audit?account_id=${customer.accountId}&page_token=abc.def`, { admin: true });
    assert.equal(forged.status, 400, forged.text);

    const client = new (loadGrpcPackage().AdminService!)(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
    try {
      const page = await unary(client, "ListAuditEvents", { accountId: customer.accountId, kind: "webhook.set", limit: 3 }, bearer(ADMIN_TOKEN));
      assert.deepEqual(page.events.map((event: { eventId: string }) => event.eventId), whole.slice(0, 3).map((event) => event.event_id));
      assert.notEqual(page.nextPageToken, "");
      const denied = await rpcError(unary(client, "ListAuditEvents", {}, bearer(customer.apiKey)));
      assert.equal(denied.code, grpc.status.UNAUTHENTICATED);
    } finally {
      client.close();
    }
  });
});
