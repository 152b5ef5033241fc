// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ADMIN_TOKEN, call, createCustomer, startTestService, type TestService } from "../support/harness.js";
import { ownerToken, reasonOf, rpc, signIn } from "../support/panel-helpers.js";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";

/** A GET whose body is counted as sent (no decoding). */
function rawGet(url: string, headers: Record<string, string>): Promise<{ headers: IncomingHttpHeaders; length: number }> {
  return new Promise((resolve, reject) => {
    httpRequest(url, { headers }, (response) => {
      let length = 0;
      response.on("data", (chunk: Buffer) => (length += chunk.length));
      response.on("end", () => resolve({ headers: response.headers, length }));
    }).on("error", reject).end();
  });
}

/**
 * Issue 11: how an account owner (and the operator) signs in to the web panel,
 * and what the session may do. Driven through the gateway's real HTTP port:
 * POST /panel/session turns an owner token (or the admin token) into an
 * HttpOnly, SameSite=Strict cookie; the panel's RPCs (the Connect mount)
 * need that cookie and its CSRF token.
 */

describe("the web panel's sign-in and session", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service?.close());

  it("when an owner token is exchanged, then an HttpOnly SameSite=Strict cookie holds the session and its CSRF token lets the owner's RPCs through", async () => {
    const customer = await createCustomer(service, "12.50");
    const { token } = await ownerToken(service, customer.accountId);
    const owner = await signIn(service, token);
    assert.match(owner.setCookie, /^gs_session=gps1\.[^;]+; Path=\/; Max-Age=43\d{3}; HttpOnly; SameSite=Strict$/);
    assert.equal(owner.json.role, "owner");
    assert.equal(owner.json.account_id, customer.accountId);
    assert.ok(Date.parse(owner.json.expire_time) > Date.now() + 11 * 3600_000);
    assert.ok(!owner.setCookie.includes(token), "the owner token itself is never put in the cookie");

    const session = await fetch(`${service.url}/panel/session`, { headers: { cookie: owner.cookie } });
    assert.equal(session.status, 200);
    assert.equal(((await session.json()) as any).csrf_token, owner.csrf, "the page can get its CSRF token back after a reload");

    const account = await rpc(service, "AccountService/GetAccount", {}, { cookie: owner.cookie, "x-csrf-token": owner.csrf });
    assert.equal(account.status, 200, account.text);
    assert.deepEqual(account.json, { accountId: customer.accountId, balance: { balance: "12.50", reserved: "0.00", available: "12.50", currency: "USD" }, name: "test" });
    const keys = await rpc(service, "AccountService/ListApiKeys", {}, { cookie: owner.cookie, "x-csrf-token": owner.csrf });
    assert.deepEqual(keys.json.keys.map((k: any) => k.keyId), [customer.keyId], "the owner token itself is not listed among the keys");
  });

  it("when a call carries the session cookie without its CSRF token (what a forged cross-site request would send), then it is 401 csrf_token_mismatch and changes nothing", async () => {
    const customer = await createCustomer(service);
    const owner = await signIn(service, (await ownerToken(service, customer.accountId)).token);
    for (const headers of [{ cookie: owner.cookie }, { cookie: owner.cookie, "x-csrf-token": "forged" }] as Record<string, string>[]) {
      const created = await rpc(service, "AccountService/CreateAccountApiKey", { models: ["*"] }, headers);
      assert.equal(created.status, 401, created.text);
      assert.equal(reasonOf(created.json), "csrf_token_mismatch");
    }
    const keys = await rpc(service, "AccountService/ListApiKeys", {}, { cookie: owner.cookie, "x-csrf-token": owner.csrf });
    assert.equal(keys.json.keys.length, 1, "no key was created");
  });

  it("when an owner manages keys, then a key is created with its grants and limits (secret once), changed, revoked and refused at once, and another account's key is not found", async () => {
    const customer = await createCustomer(service, "5.00");
    const other = await createCustomer(service, "5.00");
    const owner = await signIn(service, (await ownerToken(service, customer.accountId)).token);
    const as = { cookie: owner.cookie, "x-csrf-token": owner.csrf };
    const created = await rpc(service, "AccountService/CreateAccountApiKey", {
      models: ["*", "aimodel-3.1-flash-lite-image"], limits: { spendLimit: "2.00", rateLimitPerMinute: 30 },
    }, as);
    assert.equal(created.status, 200, created.text);
    assert.match(created.json.apiKey, /^gsk_/);
    assert.deepEqual(created.json.key.limits, { spendLimit: "2.00", rateLimitPerMinute: 30 });
    const keyId = created.json.key.keyId;

    const job = await call(service, "POST", "/api/v1/generations", { key: created.json.apiKey, body: { model: "aimodel-3.1-flash-lite-image", prompt: "a lamp", aspect_ratio: "1:1", resolution: "1K" } });
    assert.equal(job.status, 202, `the new key works at once, with the lite model's own grant: ${job.text}`);

    const listed = await rpc(service, "AccountService/ListApiKeys", {}, as);
    assert.equal(JSON.stringify(listed.json).includes(created.json.apiKey), false, "a listing never shows a secret");
    assert.deepEqual(listed.json.keys.map((k: any) => k.keyId), [customer.keyId, keyId]);

    const changed = await rpc(service, "AccountService/UpdateAccountApiKey", { keyId, limits: { dailySpendLimit: "1.00" }, updateMask: "spendLimit,dailySpendLimit" }, as);
    assert.equal(changed.status, 200, changed.text);
    assert.deepEqual(changed.json.key.limits, { dailySpendLimit: "1.00", rateLimitPerMinute: 30 });

    for (const method of ["UpdateAccountApiKey", "RevokeAccountApiKey"]) {
      const foreign = await rpc(service, `AccountService/${method}`, { keyId: other.keyId }, as);
      assert.equal(foreign.status, 404, foreign.text);
      assert.equal(reasonOf(foreign.json), "key_not_found");
    }
    assert.equal((await call(service, "GET", "/api/v1/balance", { key: other.apiKey })).status, 200, "the other account's key still works");

    const revoked = await rpc(service, "AccountService/RevokeAccountApiKey", { keyId }, as);
    assert.equal(revoked.status, 200, revoked.text);
    assert.equal(revoked.json.key.revoked, true);
    const refused = await call(service, "GET", "/api/v1/balance", { key: created.json.apiKey });
    assert.equal(refused.status, 401);
  });

  it("when grants are empty or name an unknown model, then the owner gets 422 invalid_grants and no key exists", async () => {
    const customer = await createCustomer(service);
    const owner = await signIn(service, (await ownerToken(service, customer.accountId)).token);
    const as = { cookie: owner.cookie, "x-csrf-token": owner.csrf };
    for (const models of [[], ["no-such-model"]]) {
      const refused = await rpc(service, "AccountService/CreateAccountApiKey", { models }, as);
      assert.equal(refused.status, 400, refused.text); // Connect maps INVALID_ARGUMENT to 400; the detail carries the platform's 422
      assert.equal(reasonOf(refused.json), "invalid_grants");
    }
    assert.equal((await rpc(service, "AccountService/ListApiKeys", {}, as)).json.keys.length, 1);
  });

  it("when the owner token is revoked, then its sessions end at their next call (401 session_revoked) and it cannot sign in again", async () => {
    const customer = await createCustomer(service);
    const { token, id } = await ownerToken(service, customer.accountId);
    const owner = await signIn(service, token);
    const revoked = await call(service, "DELETE", `/admin/v1/keys/${id}`, { admin: true });
    assert.equal(revoked.status, 200, revoked.text);
    const after = await rpc(service, "AccountService/GetAccount", {}, { cookie: owner.cookie, "x-csrf-token": owner.csrf });
    assert.equal(after.status, 401);
    assert.equal(reasonOf(after.json), "session_revoked");
    const again = await fetch(`${service.url}/panel/session`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    assert.equal(again.status, 401);
    assert.equal(((await again.json()) as any).error.code, "invalid_owner_token");
  });

  it("when credentials are mixed up, then each is refused where it does not belong: an API key cannot sign in or manage keys, an owner session is not the operator", async () => {
    const customer = await createCustomer(service);
    const { token } = await ownerToken(service, customer.accountId);

    const withKey = await fetch(`${service.url}/panel/session`, { method: "POST", headers: { authorization: `Bearer ${customer.apiKey}` } });
    assert.equal(withKey.status, 403);
    assert.equal(((await withKey.json()) as any).error.code, "owner_credential_required");
    const bad = await fetch(`${service.url}/panel/session`, { method: "POST", headers: { authorization: "Bearer gso_nope" } });
    assert.equal(bad.status, 401);
    const none = await fetch(`${service.url}/panel/session`);
    assert.equal(none.status, 401);
    assert.equal(((await none.json()) as any).error.code, "missing_credential");

    const owner = await signIn(service, token);
    const adminCall = await rpc(service, "AdminService/CreateAccount", { name: "x", balance: "1000" }, { cookie: owner.cookie, "x-csrf-token": owner.csrf });
    assert.equal(adminCall.status, 403, adminCall.text);
    assert.equal(reasonOf(adminCall.json), "operator_session_required");
    const keyOnOwnerApi = await rpc(service, "AccountService/ListApiKeys", {}, { authorization: `Bearer ${customer.apiKey}` });
    assert.equal(keyOnOwnerApi.status, 403);
    assert.equal(reasonOf(keyOnOwnerApi.json), "owner_credential_required");
    const tokenOnOwnerApi = await rpc(service, "AccountService/ListApiKeys", {}, { authorization: `Bearer ${token}` });
    assert.equal(tokenOnOwnerApi.status, 200, "the owner token itself works on AccountService, for scripts");
    const operator = await signIn(service, ADMIN_TOKEN);
    const explicit = await rpc(service, "AccountService/StartSession", {}, { cookie: operator.cookie, authorization: `Bearer ${token}` });
    assert.equal(explicit.json.role, "SESSION_ROLE_OWNER", "a token sent explicitly wins over the session cookie the browser carries");
    assert.equal(explicit.json.accountId, customer.accountId);
  });

  it("when the owner calls the generation APIs (owner token, or the panel session with its CSRF token), then every model is granted and the jobs and charges name the owner token as their key", async () => {
    const customer = await createCustomer(service, "5.00", ["aimodel-2.5-flash-image"]);
    const { token, id } = await ownerToken(service, customer.accountId);
    const viaToken = await call(service, "POST", "/api/v1/generations", {
      key: token, body: { model: "aimodel-3.1-flash-lite-image", prompt: "a lamp", aspect_ratio: "1:1", resolution: "1K" },
    });
    assert.equal(viaToken.status, 202, `the lite model too, which "*" alone does not grant: ${viaToken.text}`);
    const owner = await signIn(service, token);
    const viaSession = await rpc(service, "GenerationService/CreateGeneration", { model: "aimodel-2.5-flash-image", prompt: "a kettle" },
      { cookie: owner.cookie, "x-csrf-token": owner.csrf });
    assert.equal(viaSession.status, 200, viaSession.text);
    const forged = await rpc(service, "GenerationService/CreateGeneration", { model: "aimodel-2.5-flash-image", prompt: "forged" }, { cookie: owner.cookie });
    assert.equal(forged.status, 401, "no CSRF token, no job");
    const holds = await call(service, "GET", `/admin/v1/accounts/${customer.accountId}/ledger`, { admin: true });
    assert.deepEqual(holds.json.entries.filter((e: any) => e.type === "hold").map((e: any) => e.key_id), [id, id]);
    const operator = await signIn(service, ADMIN_TOKEN);
    const operatorJob = await rpc(service, "GenerationService/CreateGeneration", { model: "aimodel-2.5-flash-image", prompt: "x" },
      { cookie: operator.cookie, "x-csrf-token": operator.csrf });
    assert.equal(operatorJob.status, 403, "the operator's session spends no account's money");
  });

  it("when the admin token is exchanged, then the operator's session calls the admin RPCs with its CSRF token, and is no owner", async () => {
    const operator = await signIn(service, ADMIN_TOKEN);
    assert.equal(operator.json.role, "operator");
    assert.equal(operator.json.account_id, null);
    const as = { cookie: operator.cookie, "x-csrf-token": operator.csrf };
    const opened = await rpc(service, "AdminService/CreateAccount", { name: "from the panel", balance: "3.00" }, as);
    assert.equal(opened.status, 200, opened.text);
    const withoutCsrf = await rpc(service, "AdminService/CreateAccount", { name: "forged", balance: "3.00" }, { cookie: operator.cookie });
    assert.equal(withoutCsrf.status, 401);
    const notOwner = await rpc(service, "AccountService/GetAccount", {}, as);
    assert.equal(notOwner.status, 403);
    assert.equal(reasonOf(notOwner.json), "owner_credential_required");
  });

  it("when the panel downloads a CSV with its session cookie and CSRF token, then the statement and usage stream as for a key, and without the CSRF token, or asking for JSON, the cookie is ignored (401)", async () => {
    const customer = await createCustomer(service, "7.25");
    const owner = await signIn(service, (await ownerToken(service, customer.accountId)).token);
    const operator = await signIn(service, ADMIN_TOKEN);
    const get = (path: string, headers: Record<string, string>) => fetch(`${service.url}${path}`, { headers });
    const csv = { accept: "text/csv" };
    for (const [path, session] of [
      ["/api/v1/ledger", owner], ["/api/v1/usage?group_by=model", owner],
      [`/admin/v1/accounts/${customer.accountId}/ledger`, operator], [`/admin/v1/accounts/${customer.accountId}/usage?group_by=model`, operator],
    ] as const) {
      const downloaded = await get(path, { ...csv, cookie: session.cookie, "x-csrf-token": session.csrf });
      const text = await downloaded.text();
      assert.equal(downloaded.status, 200, `${path}: ${text}`);
      assert.match(downloaded.headers.get("content-type") ?? "", /^text\/csv/);
      if (path.includes("ledger")) {
        const [header, row] = text.split("\r\n");
        assert.match(header!, /^entry_id,type,amount,balance_after,/);
        assert.match(row!, /,credit,7\.25,7\.25,/);
      }
      const refusals: Record<string, string>[] = [{ ...csv, cookie: session.cookie }, { ...csv, cookie: session.cookie, "x-csrf-token": "forged" }, { cookie: session.cookie, "x-csrf-token": session.csrf }];
      for (const refused of refusals) {
        const answer = await get(path, refused);
        assert.equal(answer.status, 401, `${path} with ${Object.keys(refused).join("+")}: ${await answer.text()}`);
      }
    }
    const ownerAsOperator = await get(`/admin/v1/accounts/${customer.accountId}/ledger`, { ...csv, cookie: owner.cookie, "x-csrf-token": owner.csrf });
    assert.equal(ownerAsOperator.status, 403, "an owner's session is not the operator's, on REST as on the RPCs");
  });

  it("when a session is altered or signed out, then it is refused, and the sign-out clears the cookie", async () => {
    const operator = await signIn(service, ADMIN_TOKEN);
    const altered = operator.cookie.replace(/.$/, (c) => (c === "A" ? "B" : "A"));
    const refused = await fetch(`${service.url}/panel/session`, { headers: { cookie: altered } });
    assert.equal(refused.status, 401);
    assert.equal(((await refused.json()) as any).error.code, "invalid_session");
    const out = await fetch(`${service.url}/panel/session`, { method: "DELETE", headers: { cookie: operator.cookie } });
    assert.equal(out.status, 204);
    assert.match(out.headers.get("set-cookie") ?? "", /^gs_session=; Path=\/; Max-Age=0; HttpOnly; SameSite=Strict$/);
    const withBody = await fetch(`${service.url}/panel/session`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body: "{}" });
    assert.equal(withBody.status, 400);
    assert.equal(((await withBody.json()) as any).error.code, "body_not_expected");
  });

  it("when the panel's files are asked for, then the page is revalidated every time, hashed assets are cached for a year, brotli or gzip copies go to browsers that take them, and a strict content policy comes with them", async () => {
    const bare = await fetch(`${service.url}/panel`, { redirect: "manual" });
    assert.equal(bare.status, 308);
    assert.equal(bare.headers.get("location"), "/panel/");
    const page = await fetch(`${service.url}/panel/`);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get("cache-control"), "no-cache");
    assert.match(page.headers.get("content-security-policy") ?? "", /default-src 'self'.*frame-ancestors 'none'/);
    const html = await page.text();
    const asset = /src="(\/panel\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    assert.ok(asset, html);
    const script = await fetch(`${service.url}${asset}`);
    assert.equal(script.status, 200);
    assert.equal(script.headers.get("cache-control"), "public, max-age=31536000, immutable");
    assert.match(script.headers.get("content-type") ?? "", /javascript/);
    for (const encoding of ["br", "gzip"]) {
      // Node's fetch would decode it: a raw request shows what is sent.
      const raw = await rawGet(`${service.url}${asset}`, { "accept-encoding": encoding });
      assert.equal(raw.headers["content-encoding"], encoding, `the ${encoding} copy the build made`);
      assert.match(String(raw.headers.vary), /accept-encoding/i);
      assert.equal(raw.headers["cache-control"], "public, max-age=31536000, immutable");
      assert.ok(raw.length < Number((await fetch(`${service.url}${asset}`, { headers: { "accept-encoding": "identity" } })).headers.get("content-length")) / 2);
    }
    const missing = await fetch(`${service.url}/panel/assets/nope.js`);
    assert.equal(missing.status, 404);
  });
});
