// backends: embedded, real
/**
 * Keys as issue 39 asks (both backends, TEST_BACKEND): a name on every key; its name, grants and limits changed in one
 * PATCH (or UpdateAccountApiKey), effective at the very next request; a bad field is 422 naming it; creation needs a
 * model; rotation gives a new secret to the same key, the old one ended at once or after a bounded grace.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/generation/v1/admin_service_pb.js";
import { ADMIN_TOKEN, call, eventually, finishedJob, startTestService, type TestService } from "../support/harness.js";
import { assertPlatformError, assertVendorError, postGeneration } from "../support/jobs-api-helpers.js";
import { ownerToken, reasonOf, rpc, signIn } from "../support/panel-helpers.js";

const IMAGE = "aimodel-2.5-flash-image"; // 0.039 per image
const TEXT = "aimodel-3.5-flash";
const image = { model: IMAGE, prompt: "a kite", aspect_ratio: "1:1" };
const text = { contents: [{ role: "user", parts: [{ text: "hi" }] }] };
const generateText = (key: string) => call(service, "POST", `/api/aimodel/v1beta/models/${TEXT}:generateContent`, { vendorKey: key, body: text });

let service: TestService;

before(async () => {
  service = await startTestService({ SIMULATED_LATENCY_MS: "20" });
});

after(async () => {
  await service?.close();
});

async function account(balance = "10.00", name = "keys"): Promise<string> {
  const created = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name, balance } });
  assert.equal(created.status, 201, created.text);
  return created.json.account_id as string;
}

async function newKey(accountId: string, body: Record<string, unknown>) {
  const created = await call(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body });
  assert.equal(created.status, 201, created.text);
  return created.json as { key_id: string; api_key: string; name: string; [field: string]: unknown };
}

const keyOf = async (keyId: string) => (await call(service, "GET", `/admin/v1/keys/${keyId}`, { admin: true })).json;

describe("key names and changes", () => {
  it("when a key is created with a name and its name, grants and a limit change in one PATCH, then GET shows them and the removed model is 403 at once", async () => {
    const key = await newKey(await account(), { name: "build server", models: [IMAGE, TEXT] });
    assert.equal(key.name, "build server");
    assert.equal((await keyOf(key.key_id)).name, "build server");
    assert.equal((await generateText(key.api_key)).status, 200, "the text model works while granted");

    const patched = await call(service, "PATCH", `/admin/v1/keys/${key.key_id}`, { admin: true, body: { name: "images only", models: [IMAGE], spend_limit: "1.00" } });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual([patched.json.name, patched.json.models, patched.json.spend_limit], ["images only", [IMAGE], "1.00"]);

    assertVendorError(await generateText(key.api_key), 403, "PERMISSION_DENIED", "MODEL_NOT_PERMITTED");
    const job = await postGeneration(service, key.api_key, { model: TEXT, prompt: "a haiku" });
    assertPlatformError(job, 403, "model_not_permitted");
    assert.equal((await postGeneration(service, key.api_key, image)).status, 202, "the model kept still works");
    const listed = await call(service, "GET", `/admin/v1/keys/${key.key_id}`, { admin: true });
    assert.deepEqual([listed.json.name, listed.json.models, listed.json.spend_limit], ["images only", [IMAGE], "1.00"]);
  });

  it("when a PATCH has an unknown field, models of the wrong type or an unknown model, then 422 (a name too long: 400) names the field and nothing changes", async () => {
    const key = await newKey(await account(), { name: "kept", models: [IMAGE] });
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ modles: [TEXT] }, /modles/],
      [{ models: "aimodel-3.5-flash" }, /models/],
      [{ models: ["no-such-model"] }, /models/],
      [{ models: [] }, /models/],
    ];
    for (const [body, field] of cases) {
      const refused = await call(service, "PATCH", `/admin/v1/keys/${key.key_id}`, { admin: true, body });
      assert.equal(refused.status, 422, `${JSON.stringify(body).slice(0, 60)}: ${refused.text}`);
      assert.match(refused.json.error.message, field, refused.text);
    }
    const tooLong = await call(service, "PATCH", `/admin/v1/keys/${key.key_id}`, { admin: true, body: { name: "x".repeat(201), models: [TEXT] } });
    assertPlatformError(tooLong, 400, "field_too_long");
    assert.match(tooLong.json.error.message, /name/);
    const read = await keyOf(key.key_id);
    assert.deepEqual([read.name, read.models], ["kept", [IMAGE]]);
  });

  it("when a key is created with no model, then 422 names models and no key exists", async () => {
    const accountId = await account();
    for (const models of [[], ["no-such-model"]]) {
      const refused = await call(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { name: "empty", models } });
      assertPlatformError(refused, 422, "invalid_grants");
      assert.match(refused.json.error.message, /models/);
    }
    const owner = await signIn(service, (await ownerToken(service, accountId)).token);
    const listed = await rpc(service, "AccountService/ListApiKeys", {}, { cookie: owner.cookie, "x-csrf-token": owner.csrf });
    assert.deepEqual(listed.json.keys ?? [], []);
  });

  it("when an owner names a key and narrows its models through UpdateAccountApiKey, then the key's next call on the removed model is refused", async () => {
    const accountId = await account();
    const owner = await signIn(service, (await ownerToken(service, accountId)).token);
    const as = { cookie: owner.cookie, "x-csrf-token": owner.csrf };
    const created = await rpc(service, "AccountService/CreateAccountApiKey", { name: "laptop", models: [IMAGE, TEXT] }, as);
    assert.equal(created.status, 200, created.text);
    assert.equal(created.json.key.name, "laptop");
    const changed = await rpc(service, "AccountService/UpdateAccountApiKey", {
      keyId: created.json.key.keyId, name: "laptop (images)", models: [IMAGE], limits: { dailySpendLimit: "2.00" }, updateMask: "name,models,dailySpendLimit",
    }, as);
    assert.equal(changed.status, 200, changed.text);
    assert.deepEqual([changed.json.key.name, changed.json.key.models, changed.json.key.limits], ["laptop (images)", [IMAGE], { dailySpendLimit: "2.00" }]);
    assertVendorError(await generateText(created.json.apiKey), 403, "PERMISSION_DENIED", "MODEL_NOT_PERMITTED");
    const unknown = await rpc(service, "AccountService/UpdateAccountApiKey", { keyId: created.json.key.keyId, updateMask: "colour" }, as);
    assert.equal(unknown.status, 400, unknown.text);
    assert.equal(reasonOf(unknown.json), "unknown_field");
    assert.match(unknown.json.message, /colour/);
  });
});

describe("key rotation", () => {
  it("when a key is rotated with no grace, then the old secret is refused at once and the new one keeps the key's id, grants, limits and spending", async () => {
    const accountId = await account("10.00");
    const key = await newKey(accountId, { name: "rotating", models: [IMAGE], spend_limit: "5.00" });
    const job = await postGeneration(service, key.api_key, image);
    assert.equal(job.status, 202, job.text);
    assert.equal((await finishedJob(service, key.api_key, job.json.job_id)).status, "done");

    const bodiless = await call(service, "POST", `/admin/v1/keys/${key.key_id}/rotate`, { admin: true });
    assert.equal(bodiless.status, 422, `a rotation without its JSON body is refused as the document says: ${bodiless.text}`);
    const rotated = await call(service, "POST", `/admin/v1/keys/${key.key_id}/rotate`, { admin: true, body: {} });
    assert.equal(rotated.status, 200, rotated.text);
    assert.match(rotated.json.api_key, /^gsk_/);
    assert.notEqual(rotated.json.api_key, key.api_key);
    assert.deepEqual(
      [rotated.json.key_id, rotated.json.name, rotated.json.models, rotated.json.spend_limit, rotated.json.spent, rotated.json.rotation_grace_expire_time],
      [key.key_id, "rotating", [IMAGE], "5.00", "0.039", null],
    );
    assertPlatformError(await call(service, "GET", "/api/v1/balance", { key: key.api_key }), 401, "invalid_api_key");
    const second = await postGeneration(service, rotated.json.api_key, image);
    assert.equal(second.status, 202, second.text);
    assert.equal((await finishedJob(service, rotated.json.api_key, second.json.job_id)).status, "done");
    // The statement: both charges by the same key id, exact amounts; the key's spending continues across the rotation.
    const statement = await call(service, "GET", "/api/v1/ledger", { key: rotated.json.api_key });
    const charges = statement.json.entries.filter((entry: any) => entry.type === "charge");
    assert.deepEqual(charges.map((entry: any) => [entry.amount, entry.key_id]), [["-0.039", key.key_id], ["-0.039", key.key_id]]);
    assert.deepEqual(statement.json.entries[0].balance_after, "9.922");
    assert.equal((await keyOf(key.key_id)).spent, "0.078");
  });

  it("when a key is rotated with a grace, then both secrets work until its end and only the new one after", async () => {
    const key = await newKey(await account(), { models: [IMAGE] });
    const rotated = await call(service, "POST", `/admin/v1/keys/${key.key_id}/rotate`, { admin: true, body: { grace_seconds: 2 } });
    assert.equal(rotated.status, 200, rotated.text);
    const ends = Date.parse(rotated.json.rotation_grace_expire_time);
    assert.ok(ends > Date.now() && ends <= Date.now() + 2_000, rotated.text);
    const balanceWith = (secret: string) => call(service, "GET", "/api/v1/balance", { key: secret });
    assert.equal((await balanceWith(key.api_key)).status, 200, "the old secret works during the grace");
    assert.equal((await balanceWith(rotated.json.api_key)).status, 200, "the new secret works at once");
    await eventually(() => balanceWith(key.api_key), (answer) => answer.status === 401, { what: "the old secret ended after its grace", timeoutMs: 10_000 });
    assert.ok(Date.now() >= ends, "never before the grace's end");
    assert.equal((await balanceWith(rotated.json.api_key)).status, 200);
    assert.equal((await keyOf(key.key_id)).rotation_grace_expire_time, null);
  });

  it("when grace_seconds is out of bounds or the key is revoked, then rotation is refused and the secret still answers as before", async () => {
    const key = await newKey(await account(), { models: [IMAGE] });
    for (const grace of [-1, 86_401]) {
      const refused = await call(service, "POST", `/admin/v1/keys/${key.key_id}/rotate`, { admin: true, body: { grace_seconds: grace } });
      assertPlatformError(refused, 422, "invalid_grace_seconds");
      assert.match(refused.json.error.message, /grace_seconds/);
    }
    assert.equal((await call(service, "GET", "/api/v1/balance", { key: key.api_key })).status, 200);
    assert.equal((await call(service, "DELETE", `/admin/v1/keys/${key.key_id}`, { admin: true })).status, 200);
    assertPlatformError(await call(service, "POST", `/admin/v1/keys/${key.key_id}/rotate`, { admin: true, body: {} }), 404, "key_not_found");
  });

  it("when RotateApiKey is called over gRPC and RotateAccountApiKey by the owner, then each answers a new secret for the same key", async () => {
    const accountId = await account();
    const key = await newKey(accountId, { models: [IMAGE] });
    const client = createClient(AdminService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const byAdmin = await client.rotateApiKey({ keyId: key.key_id, graceSeconds: 60 }, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(byAdmin.key?.keyId, key.key_id);
    assert.ok(byAdmin.key?.rotationGraceExpireTime, "the grace's end is shown");
    for (const secret of [key.api_key, byAdmin.apiKey]) assert.equal((await call(service, "GET", "/api/v1/balance", { key: secret })).status, 200);

    const owner = await signIn(service, (await ownerToken(service, accountId)).token);
    const byOwner = await rpc(service, "AccountService/RotateAccountApiKey", { keyId: key.key_id }, { cookie: owner.cookie, "x-csrf-token": owner.csrf });
    assert.equal(byOwner.status, 200, byOwner.text);
    assert.equal(byOwner.json.key.keyId, key.key_id);
    for (const secret of [key.api_key, byAdmin.apiKey]) {
      assertPlatformError(await call(service, "GET", "/api/v1/balance", { key: secret }), 401, "invalid_api_key");
    }
    assert.equal((await call(service, "GET", "/api/v1/balance", { key: byOwner.json.apiKey })).status, 200);
  });
});

describe("the operator's account list", () => {
  it("when accounts are searched by a name prefix in any case or by an id prefix, then exactly the matches are listed with their money, paged", async () => {
    const tag = `Zq${Date.now().toString(36)}`;
    const ids = [await account("1.00", `${tag} Alpha`), await account("2.50", `${tag} beta`), await account("3.00", `${tag} Gamma`), await account("4.00", "other")];
    const key = await newKey(ids[1]!, { models: [IMAGE] });
    const job = await postGeneration(service, key.api_key, image);
    assert.equal(job.status, 202, job.text);

    const found = await call(service, "GET", `/admin/v1/accounts?q=${encodeURIComponent(tag.toLowerCase())}`, { admin: true });
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(found.json.accounts.map((a: any) => a.account_id), ids.slice(0, 3), "by name, case-insensitively, never the other");
    const beta = found.json.accounts[1];
    assert.equal(beta.name, `${tag} beta`);
    assert.equal(beta.status, "active");
    assert.ok(Date.parse(beta.created_at) <= Date.now());
    assert.equal(beta.balance === "2.50" || beta.balance === "2.461", true, JSON.stringify(beta));

    const pages: string[] = [];
    let token: string | null = null;
    do {
      const page: any = await call(service, "GET", `/admin/v1/accounts?q=${encodeURIComponent(tag)}&limit=2${token ? `&page_token=${token}` : ""}`, { admin: true });
      assert.equal(page.status, 200, page.text);
      pages.push(...page.json.accounts.map((a: any) => a.account_id));
      token = page.json.next_page_token;
    } while (token);
    assert.deepEqual(pages, ids.slice(0, 3), "pages of two list each match once");

    const byId = await call(service, "GET", `/admin/v1/accounts?q=${ids[3]!.slice(0, 20)}`, { admin: true });
    assert.equal(byId.json.accounts.some((a: any) => a.account_id === ids[3]), true, byId.text);
    assert.equal(byId.json.accounts.every((a: any) => a.account_id.startsWith(ids[3]!.slice(0, 20))), true);
    assertPlatformError(await call(service, "GET", "/admin/v1/accounts?limit=0", { admin: true }), 400, "invalid_limit");
    assertPlatformError(await call(service, "GET", "/admin/v1/accounts?page_token=nope", { admin: true }), 400, "invalid_page_token");

    const client = createClient(AdminService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const listed = await client.listAccounts({ q: tag.toUpperCase(), limit: 10 }, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.deepEqual(listed.accounts.map((a) => a.accountId), ids.slice(0, 3));
    await finishedJob(service, key.api_key, job.json.job_id);
    const settled = await client.listAccounts({ q: ids[1]! }, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.deepEqual([settled.accounts[0]?.balance?.balance, settled.accounts[0]?.balance?.reserved, settled.accounts[0]?.openJobs], ["2.461", "0.00", 0]);
  });
});
