// backends: embedded, real
/**
 * The audit trail of money and permissions (issue 39): a credit (with its reason), a key's creation, update, rotation
 * and revocation (by the operator and by the owner), an owner token, a price and a tool price, a panel session started
 * and ended each leave exactly one event with its kind, actor, client address, account and before/after, readable by
 * the operator (GET /admin/v1/audit) and by the account's owner (AccountService.ListAuditEvents); a refused change
 * leaves none; no secret is ever in an event. Both backends.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { call, createCustomer, startTestService, type ApiResponse, type TestService } from "../support/harness.js";
import { ownerToken, rpc } from "../support/panel-helpers.js";
import { parseMoney } from "../../src/domain/money.js";
import type { AuditEventJson } from "../support/audit-events.js";

let service: TestService;

before(async () => {
  service = await startTestService();
});

after(async () => {
  await service?.close();
});


async function audit(query: Record<string, string>): Promise<AuditEventJson[]> {
  const events: AuditEventJson[] = [];
  let token: string | null = null;
  do {
    const params: URLSearchParams = new URLSearchParams({ ...query, ...(token ? { page_token: token } : {}) });
    const response: ApiResponse = await call(service, "GET", `/admin/v1/audit?${params}`, { admin: true });
    assert.equal(response.status, 200, response.text);
    events.push(...(response.json.events as AuditEventJson[]));
    token = response.json.next_page_token;
  } while (token);
  return events;
}

/** The one event of this kind on the account (exactly one), oldest first otherwise. */
async function only(accountId: string | undefined, kind: string, since?: string): Promise<AuditEventJson> {
  const events = await audit({ kind, ...(accountId ? { account_id: accountId } : {}), ...(since ? { from: since } : {}) });
  assert.equal(events.length, 1, `one ${kind} event: ${JSON.stringify(events)}`);
  return events[0]!;
}

const LOOPBACK = /^(::ffff:)?127\.0\.0\.1$/;
const parsed = (text: string | null) => (text === null ? null : JSON.parse(text));

/** No event of the account mentions any of the secrets (nor their bodies without the prefix). */
async function noSecrets(accountId: string, secrets: string[]) {
  const text = JSON.stringify(await audit({ account_id: accountId }));
  for (const secret of secrets) assert.ok(!text.includes(secret.slice(4)), "no secret is recorded");
}

describe("the audit trail of money and permissions", () => {
  it("when the operator credits an account with a reason, then one credit.added event has the balance before and after and the reason", async () => {
    const customer = await createCustomer(service, "1.00");
    const credited = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, {
      admin: true, body: { amount: "2.50", reason: "refund of ticket 1234" },
    });
    assert.equal(credited.status, 200, credited.text);
    const event = await only(customer.accountId, "credit.added");
    assert.equal(event.actor, "admin");
    assert.match(event.client_address, LOOPBACK);
    assert.equal(event.account_id, customer.accountId);
    assert.deepEqual(parsed(event.before), { balance: "1.00" });
    assert.deepEqual(parsed(event.after), { balance: "3.50", amount: "2.50", reason: "refund of ticket 1234" });
    const balance = await call(service, "GET", `/admin/v1/accounts/${customer.accountId}/balance`, { admin: true });
    assert.equal(parseMoney(balance.json.balance), parseMoney(parsed(event.after).balance), "the balance the event says is the account's");

    const { token } = await ownerToken(service, customer.accountId);
    const own = await rpc(service, "AccountService/ListAuditEvents", { query: { kind: "credit.added" } }, { authorization: `Bearer ${token}` });
    assert.equal(own.status, 200, own.text);
    assert.deepEqual(own.json.events.map((e: { eventId: string }) => e.eventId), [event.event_id]);
  });

  it("when the operator debits an account with an adjustment, then one balance.adjusted event has the balance before and after and the reason; a refused debit leaves none", async () => {
    const customer = await createCustomer(service, "3.00");
    const since = new Date().toISOString();
    const refused = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/adjustments`, {
      admin: true, body: { amount: "-3.01", reason: "more than there is" },
    });
    assert.equal(refused.status, 409, refused.text);
    assert.deepEqual(await audit({ kind: "balance.adjusted", from: since }), []);
    const adjusted = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/adjustments`, {
      admin: true, body: { amount: "-1.25", reason: "duplicate credit of ticket 77" },
    });
    assert.equal(adjusted.status, 201, adjusted.text);
    const event = await only(customer.accountId, "balance.adjusted");
    assert.equal(event.actor, "admin");
    assert.match(event.client_address, LOOPBACK);
    assert.deepEqual(parsed(event.before), { balance: "3.00" });
    assert.deepEqual(parsed(event.after), { balance: "1.75", amount: "-1.25", reason: "duplicate credit of ticket 77" });
    const balance = await call(service, "GET", `/admin/v1/accounts/${customer.accountId}/balance`, { admin: true });
    assert.equal(balance.json.balance, "1.75");
  });

  it("when a credit is refused (bad amount, too long a reason, unknown account), then it leaves no event", async () => {
    const customer = await createCustomer(service, "1.00");
    const since = new Date().toISOString();
    const bad = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { admin: true, body: { amount: "-1" } });
    assert.equal(bad.status, 422, bad.text);
    const long = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { admin: true, body: { amount: "1", reason: "x".repeat(501) } });
    assert.equal(long.status, 400, long.text);
    const unknown = await call(service, "POST", "/admin/v1/accounts/acct_nobody/credits", { admin: true, body: { amount: "1" } });
    assert.equal(unknown.status, 404, unknown.text);
    assert.deepEqual(await audit({ kind: "credit.added", from: since }), []);
  });

  it("when the operator creates, updates, rotates and revokes a key, then each is one event of the admin's, without a secret", async () => {
    const customer = await createCustomer(service, "1.00");
    const created = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/keys`, {
      admin: true, body: { name: "ci", models: ["aimodel-3.5-flash"], spend_limit: "5.00" },
    });
    assert.equal(created.status, 201, created.text);
    const keyId = created.json.key_id as string;
    const updated = await call(service, "PATCH", `/admin/v1/keys/${keyId}`, { admin: true, body: { name: "ci-2", models: ["*"] } });
    assert.equal(updated.status, 200, updated.text);
    const rotated = await call(service, "POST", `/admin/v1/keys/${keyId}/rotate`, { admin: true, body: { grace_seconds: 60 } });
    assert.equal(rotated.status, 200, rotated.text);
    const revoked = await call(service, "DELETE", `/admin/v1/keys/${keyId}`, { admin: true });
    assert.equal(revoked.status, 200, revoked.text);

    const events = (await audit({ account_id: customer.accountId })).filter((event) => event.subject === keyId);
    assert.deepEqual(events.map((event) => [event.kind, event.actor, event.account_id]), [
      ["key.revoked", "admin", customer.accountId], ["key.rotated", "admin", customer.accountId],
      ["key.updated", "admin", customer.accountId], ["key.created", "admin", customer.accountId],
    ]);
    const [revokedEvent, rotatedEvent, updatedEvent, createdEvent] = events as [AuditEventJson, AuditEventJson, AuditEventJson, AuditEventJson];
    assert.deepEqual(parsed(createdEvent.after), { name: "ci", models: ["aimodel-3.5-flash"], limits: { spendLimit: "5.00" }, secret: "issued" });
    assert.deepEqual(parsed(updatedEvent.before), { name: "ci", models: ["aimodel-3.5-flash"] });
    assert.deepEqual(parsed(updatedEvent.after), { name: "ci-2", models: ["*"] });
    assert.equal(parsed(rotatedEvent.after).secret, "changed");
    assert.equal(parsed(rotatedEvent.after).grace_seconds, 60);
    assert.deepEqual([parsed(revokedEvent.before), parsed(revokedEvent.after)], [{ revoked: false }, { revoked: true }]);
    for (const event of events) assert.match(event.client_address, LOOPBACK);
    await noSecrets(customer.accountId, [customer.apiKey, created.json.api_key, rotated.json.api_key]);
  });

  it("when the owner creates, updates, rotates and revokes a key, then each is one event of owner:<account>, listed to the owner", async () => {
    const customer = await createCustomer(service, "1.00");
    const { token, id: tokenId } = await ownerToken(service, customer.accountId);
    const tokenEvent = await only(customer.accountId, "owner_token.created");
    assert.deepEqual([tokenEvent.actor, tokenEvent.subject], ["admin", tokenId]);
    const as = { authorization: `Bearer ${token}` };
    const created = await rpc(service, "AccountService/CreateAccountApiKey", { name: "mine", models: ["*"] }, as);
    assert.equal(created.status, 200, created.text);
    const keyId = created.json.key.keyId as string;
    const updated = await rpc(service, "AccountService/UpdateAccountApiKey", { keyId, name: "mine-2", updateMask: "name" }, as);
    assert.equal(updated.status, 200, updated.text);
    const rotated = await rpc(service, "AccountService/RotateAccountApiKey", { keyId }, as);
    assert.equal(rotated.status, 200, rotated.text);
    const revoked = await rpc(service, "AccountService/RevokeAccountApiKey", { keyId }, as);
    assert.equal(revoked.status, 200, revoked.text);

    const owner = `owner:${customer.accountId}`;
    const events = (await audit({ account_id: customer.accountId, actor: owner })).filter((event) => event.subject === keyId);
    assert.deepEqual(events.map((event) => event.kind), ["key.revoked", "key.rotated", "key.updated", "key.created"]);
    assert.deepEqual([parsed(events[2]!.before), parsed(events[2]!.after)], [{ name: "mine" }, { name: "mine-2" }]);
    const own = await rpc(service, "AccountService/ListAuditEvents", { query: { actor: owner } }, as);
    assert.equal(own.status, 200, own.text);
    assert.deepEqual(
      own.json.events.filter((e: { subject: string }) => e.subject === keyId).map((e: { eventId: string }) => e.eventId),
      events.map((event) => event.event_id),
    );
    await noSecrets(customer.accountId, [token, created.json.apiKey, rotated.json.apiKey]);
  });

  it("when a key change is refused (unknown key, bad grants, another account's key, bad grace), then it leaves no event", async () => {
    const customer = await createCustomer(service, "1.00");
    const other = await createCustomer(service, "1.00");
    const { token } = await ownerToken(service, customer.accountId);
    const since = new Date().toISOString();
    const as = { authorization: `Bearer ${token}` };
    assert.equal((await call(service, "PATCH", "/admin/v1/keys/key_nobody", { admin: true, body: { name: "x" } })).status, 404);
    assert.equal((await call(service, "DELETE", "/admin/v1/keys/key_nobody", { admin: true })).status, 404);
    assert.equal((await call(service, "POST", `/admin/v1/keys/${customer.keyId}/rotate`, { admin: true, body: { grace_seconds: -1 } })).status, 422);
    const badGrants = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/keys`, { admin: true, body: { models: ["no-such-model"] } });
    assert.equal(badGrants.status, 422, badGrants.text);
    assert.equal((await rpc(service, "AccountService/RevokeAccountApiKey", { keyId: other.keyId }, as)).status, 404);
    assert.equal((await rpc(service, "AccountService/UpdateAccountApiKey", { keyId: other.keyId, name: "x", updateMask: "name" }, as)).status, 404);
    assert.deepEqual((await audit({ from: since })).filter((e) => e.account_id === customer.accountId || e.account_id === other.accountId), []);
  });

  it("when the operator changes a price and sets and deletes a tool price, then each is one event with the values before and after", async () => {
    const since = new Date().toISOString();
    const model = "aimodel-2.5-flash-image";
    const listed = await call(service, "GET", "/admin/v1/prices", { admin: true });
    const old = (listed.json.prices as { model: string; per_image: Record<string, string> }[]).find((price) => price.model === model)!;
    const changed = await call(service, "PUT", `/admin/v1/prices/${model}`, { admin: true, body: { per_image: { "1K": "0.05" } } });
    assert.equal(changed.status, 200, changed.text);
    const price = await only(undefined, "price.updated", since);
    assert.deepEqual([price.actor, price.subject, price.account_id], ["admin", model, null]);
    assert.equal(Number(parsed(price.before).per_image["1K"]), Number(old.per_image["1K"]));
    assert.equal(parsed(price.after).per_image["1K"], "0.05");
    assert.equal((await call(service, "PUT", `/admin/v1/prices/${model}`, { admin: true, body: { per_image: old.per_image } })).status, 200);

    assert.equal((await call(service, "PUT", "/admin/v1/prices/tools/urlContext", { admin: true, body: { per_call: "0.01" } })).status, 200);
    assert.equal((await call(service, "DELETE", "/admin/v1/prices/tools/urlContext", { admin: true })).status, 200);
    const set = await only(undefined, "tool_price.set", since);
    assert.deepEqual([set.subject, parsed(set.before), parsed(set.after)], ["urlContext", null, { per_call: "0.01" }]);
    const deleted = await only(undefined, "tool_price.deleted", since);
    assert.deepEqual([deleted.subject, parsed(deleted.before), parsed(deleted.after)], ["urlContext", { per_call: "0.01" }, null]);

    // Refused: an unknown model or tool, a bad price; deleting an unpriced tool changes nothing.
    assert.equal((await call(service, "PUT", "/admin/v1/prices/no-such-model", { admin: true, body: { per_image: { "1K": "1" } } })).status, 404);
    assert.equal((await call(service, "PUT", "/admin/v1/prices/tools/noSuchTool", { admin: true, body: { per_call: "1" } })).status, 404);
    assert.equal((await call(service, "DELETE", "/admin/v1/prices/tools/urlContext", { admin: true })).status, 200);
    assert.equal((await audit({ from: since, kind: "tool_price.deleted" })).length, 1);
    assert.equal((await audit({ from: since, kind: "tool_price.set" })).length, 1);
    assert.equal((await audit({ from: since, kind: "price.updated" })).length, 2);
  });

  it("when an owner starts and ends a panel session and the operator ends another, then each is one event, never with the session's token", async () => {
    const customer = await createCustomer(service, "1.00");
    const { token } = await ownerToken(service, customer.accountId);
    const first = await rpc(service, "AccountService/StartSession", {}, { authorization: `Bearer ${token}` });
    assert.equal(first.status, 200, first.text);
    const ended = await rpc(service, "AccountService/EndSession", {}, { "x-panel-session": first.json.session });
    assert.equal(ended.status, 200, ended.text);
    const again = await rpc(service, "AccountService/EndSession", {}, { "x-panel-session": first.json.session });
    assert.equal(again.status, 200, again.text);
    const second = await rpc(service, "AccountService/StartSession", {}, { authorization: `Bearer ${token}` });
    assert.equal(second.status, 200, second.text);
    const sessions = await call(service, "GET", "/admin/v1/panel-sessions", { admin: true });
    const open = (sessions.json.sessions as { session_id: string; account_id: string }[]).find((s) => s.account_id === customer.accountId)!;
    assert.equal((await call(service, "DELETE", `/admin/v1/panel-sessions/${open.session_id}`, { admin: true })).status, 200);
    await call(service, "DELETE", `/admin/v1/panel-sessions/${open.session_id}`, { admin: true }); // ended already: no second event

    const events = (await audit({ account_id: customer.accountId })).filter((event) => event.kind.startsWith("session."));
    const owner = `owner:${customer.accountId}`;
    assert.deepEqual(events.map((event) => [event.kind, event.actor]), [
      ["session.ended", "admin"], ["session.started", owner], ["session.ended", owner], ["session.started", owner],
    ]);
    assert.equal(events[0]!.subject, open.session_id);
    assert.equal(events[0]!.subject, events[1]!.subject);
    assert.equal(events[2]!.subject, events[3]!.subject);
    assert.equal(parsed(events[3]!.after).role, "owner");
    for (const event of events) assert.match(event.client_address, LOOPBACK);
    await noSecrets(customer.accountId, [token, first.json.session, second.json.session, first.json.csrfToken]);
  });
});
