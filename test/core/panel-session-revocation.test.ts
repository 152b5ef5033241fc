// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config/config.js";
import { startService, type RunningService } from "../../src/runtime/start-service.js";
import { ADMIN_TOKEN, BACKEND, call, createCustomer, dropRealBackend, realBackendEnv, startTestService, type TestService } from "../support/harness.js";
import { ownerToken, reasonOf, rpc, signIn, type Signed } from "../support/panel-helpers.js";

/**
 * Issue 34: a panel session is ended for real (sign-out, the operator, its
 * owner token revoked, another ADMIN_TOKEN), not only forgotten by the
 * browser; and its cookie is Secure whenever the browser reached the service
 * over HTTPS. Driven through the gateway's real HTTP port.
 */

/** What a saved copy of a session can still do: an operator's admin call, or an owner's account call. */
async function replay(service: { url: string }, session: Signed, role: "operator" | "owner") {
  const headers = { cookie: session.cookie, "x-csrf-token": session.csrf };
  return role === "operator"
    ? rpc(service as TestService, "AdminService/CreateAccount", { name: "replayed", balance: "1000000.00" }, headers)
    : rpc(service as TestService, "AccountService/GetAccount", {}, headers);
}

const signOut = (service: { url: string }, cookie: string) => fetch(`${service.url}/panel/session`, { method: "DELETE", headers: { cookie } });

describe("panel sessions end for real", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service?.close());

  it("when the operator signs out, then a saved copy of the session cookie is refused (401 session_revoked) and opens no account", async () => {
    const operator = await signIn(service, ADMIN_TOKEN);
    assert.equal((await replay(service, operator, "operator")).status, 200, "the session works before sign-out");
    const out = await signOut(service, operator.cookie);
    assert.equal(out.status, 204);
    assert.match(out.headers.get("set-cookie") ?? "", /^gs_session=; Path=\/; Max-Age=0; HttpOnly; SameSite=Strict$/);

    const replayed = await replay(service, operator, "operator");
    assert.equal(replayed.status, 401, replayed.text);
    assert.equal(reasonOf(replayed.json), "session_revoked");
    const read = await fetch(`${service.url}/panel/session`, { headers: { cookie: operator.cookie } });
    assert.equal(read.status, 401);
    assert.equal(((await read.json()) as any).error.code, "session_revoked");
    assert.equal((await signOut(service, operator.cookie)).status, 204, "signing out again is no error");
  });

  it("when an owner signs out, then a saved copy of the cookie is refused, and the owner's other sessions go on", async () => {
    const customer = await createCustomer(service);
    const { token } = await ownerToken(service, customer.accountId);
    const first = await signIn(service, token);
    const second = await signIn(service, token);
    assert.equal((await signOut(service, first.cookie)).status, 204);
    const replayed = await replay(service, first, "owner");
    assert.equal(replayed.status, 401, replayed.text);
    assert.equal(reasonOf(replayed.json), "session_revoked");
    assert.equal((await replay(service, second, "owner")).status, 200, "only the session signed out ends");
  });

  it("when the operator lists sessions, then each open one shows who and when but never its token, and revoking one ends it at once", async () => {
    const customer = await createCustomer(service);
    const { token, id } = await ownerToken(service, customer.accountId);
    const owner = await signIn(service, token);
    const operator = await signIn(service, ADMIN_TOKEN);

    const listed = await call(service, "GET", "/admin/v1/panel-sessions", { admin: true });
    assert.equal(listed.status, 200, listed.text);
    const mine = listed.json.sessions.filter((s: any) => s.account_id === customer.accountId);
    assert.equal(mine.length, 1, listed.text);
    assert.deepEqual(Object.keys(mine[0]).sort(), ["account_id", "create_time", "credential_id", "expire_time", "role", "session_id"]);
    assert.equal(mine[0].role, "owner");
    assert.equal(mine[0].credential_id, id);
    assert.equal(mine[0].expire_time, owner.json.expire_time);
    assert.ok(listed.json.sessions.some((s: any) => s.role === "operator" && s.account_id === null), "the operator's session is listed too");
    for (const session of [owner, operator]) {
      assert.equal(listed.text.includes(session.cookie.slice("gs_session=".length)), false, "a listing never shows a session's token");
    }

    const revoked = await call(service, "DELETE", `/admin/v1/panel-sessions/${mine[0].session_id}`, { admin: true });
    assert.equal(revoked.status, 200, revoked.text);
    assert.deepEqual(revoked.json, { session_id: mine[0].session_id, revoked: true });
    const replayed = await replay(service, owner, "owner");
    assert.equal(replayed.status, 401, replayed.text);
    assert.equal(reasonOf(replayed.json), "session_revoked");
    const after = await call(service, "GET", "/admin/v1/panel-sessions", { admin: true });
    assert.equal(after.json.sessions.some((s: any) => s.session_id === mine[0].session_id), false, "an ended session is no longer listed");

    const one = await call(service, "GET", "/admin/v1/panel-sessions?limit=1", { admin: true });
    assert.equal(one.json.sessions.length, 1, one.text);
    for (const limit of ["0", "1001", "ten"]) {
      const refused = await call(service, "GET", `/admin/v1/panel-sessions?limit=${limit}`, { admin: true });
      assert.equal(refused.status, 400, refused.text);
      assert.equal(refused.json.error.code, "invalid_limit");
    }
    const unknown = await call(service, "DELETE", "/admin/v1/panel-sessions/no-such-session", { admin: true });
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(unknown.json.error.code, "panel_session_not_found");
    const viaRpc = await rpc(service, "AdminService/ListPanelSessions", {}, { cookie: operator.cookie, "x-csrf-token": operator.csrf });
    assert.equal(viaRpc.status, 200, `the panel's operator lists them over the Connect mount too: ${viaRpc.text}`);
    const unauthenticated = await call(service, "GET", "/admin/v1/panel-sessions");
    assert.equal(unauthenticated.status, 401);
  });

  it("when an owner token is rotated (a new one issued, the old one revoked), then the old token's sessions end and leave the listing, and the new token's session works", async () => {
    const customer = await createCustomer(service);
    const old = await ownerToken(service, customer.accountId);
    const oldSession = await signIn(service, old.token);
    const fresh = await ownerToken(service, customer.accountId);
    assert.equal((await call(service, "DELETE", `/admin/v1/keys/${old.id}`, { admin: true })).status, 200);

    const replayed = await replay(service, oldSession, "owner");
    assert.equal(replayed.status, 401, replayed.text);
    assert.equal(reasonOf(replayed.json), "session_revoked");
    const listed = await call(service, "GET", "/admin/v1/panel-sessions", { admin: true });
    assert.equal(listed.status, 200, listed.text);
    assert.equal(listed.json.sessions.some((s: any) => s.credential_id === old.id), false, "the revoked token's sessions are not open");
    const newSession = await signIn(service, fresh.token);
    assert.equal((await replay(service, newSession, "owner")).status, 200);
  });
});

describe("panel sessions through a gateway in front of a remote core (CORE_URL)", () => {
  let core: TestService;
  let gateway: TestService;
  // Every process of a deployment shares the signing secret (docs/panel.md): the gateway checks signatures, the core the records.
  const secret = { URL_SIGNING_SECRET: "one secret for the whole deployment" };
  before(async () => {
    core = await startTestService(secret);
    gateway = await startTestService({ ...secret, CORE_URL: core.grpcUrl });
  });
  after(async () => {
    await gateway?.close();
    await core?.close();
  });

  it("when the operator signs out through the gateway, then a saved copy of the cookie is refused there and at the core", async () => {
    const operator = await signIn(gateway, ADMIN_TOKEN);
    assert.equal((await replay(gateway, operator, "operator")).status, 200, "the session works through the remote hop");
    assert.equal((await signOut(gateway, operator.cookie)).status, 204);
    for (const service of [gateway, core]) {
      const replayed = await replay(service, operator, "operator");
      assert.equal(replayed.status, 401, replayed.text);
      assert.equal(reasonOf(replayed.json), "session_revoked");
    }
  });
});

/** A service on a DATA_DIR (and, on the real backend, a keyspace) that outlives it, so the next start finds the same state. */
async function startOn(dataDir: string, backendEnv: Record<string, string>, adminToken: string): Promise<RunningService> {
  const config = loadConfig({
    HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", ADMIN_TOKEN: adminToken, DATA_DIR: dataDir, LOG_LEVEL: "silent",
    SHUTDOWN_GRACE: "200ms", DRAIN_DELAY: "0ms", ...backendEnv,
  });
  return startService(config);
}

describe("panel sessions and a changed ADMIN_TOKEN", () => {
  let dataDir: string;
  const backendEnv = BACKEND === "real" ? realBackendEnv() : {};
  let current: RunningService | undefined;
  /** Stops the running service (if any) and starts the next on the same state. */
  const restart = async (adminToken: string) => {
    await current?.close();
    current = await startOn(dataDir, backendEnv, adminToken);
    return { url: current.httpUrl } as TestService;
  };
  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "panel-restart-"));
  });
  after(async () => {
    await current?.close();
    await rm(dataDir, { recursive: true, force: true });
    if (BACKEND === "real") await dropRealBackend(backendEnv);
  });

  it("when the service restarts with a different ADMIN_TOKEN on the same DATA_DIR, then an operator session issued before is refused and opens no account; with the same token it goes on", async () => {
    const first = await restart("first-admin-token-0123456789abcdef");
    const operator = await signIn(first, "first-admin-token-0123456789abcdef");

    const same = await restart("first-admin-token-0123456789abcdef");
    const kept = await replay(same, operator, "operator");
    assert.equal(kept.status, 200, `a restart alone ends no session: ${kept.text}`);

    const changed = await restart("second-admin-token-0123456789abcdef");
    const replayed = await replay(changed, operator, "operator");
    assert.equal(replayed.status, 401, replayed.text);
    assert.equal(reasonOf(replayed.json), "session_revoked");
    const read = await fetch(`${changed.url}/panel/session`, { headers: { cookie: operator.cookie } });
    assert.equal(read.status, 401, "the old session is not handed its CSRF token either");
    const listed = await fetch(`${changed.url}/admin/v1/panel-sessions`, { headers: { authorization: "Bearer second-admin-token-0123456789abcdef" } });
    assert.equal(listed.status, 200);
    assert.deepEqual(((await listed.json()) as any).sessions, [], "the old token's operator session is not open");
    const operatorNow = await signIn(changed, "second-admin-token-0123456789abcdef");
    assert.equal((await replay(changed, operatorNow, "operator")).status, 200, "the new token signs in as before");
  });
});

describe("the session cookie's Secure attribute", () => {
  const services: TestService[] = [];
  after(async () => {
    for (const service of services) await service.close();
  });
  const started = async (env: Record<string, string>) => {
    const service = await startTestService(env);
    services.push(service);
    return service;
  };
  const signInVia = (service: TestService, headers: Record<string, string>) =>
    fetch(`${service.url}/panel/session`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...headers } });

  it("when TRUST_PROXY names the proxy and it forwards X-Forwarded-Proto: https, then the cookie is Secure; when the peer is not trusted, then the header is ignored", async () => {
    const trusted = await started({ TRUST_PROXY: "127.0.0.1" });
    const viaTls = await signInVia(trusted, { "x-forwarded-proto": "https" });
    assert.equal(viaTls.status, 200);
    assert.match(viaTls.headers.get("set-cookie") ?? "", /; HttpOnly; SameSite=Strict; Secure$/);
    const cookie = (viaTls.headers.get("set-cookie") ?? "").split(";")[0]!;
    const out = await fetch(`${trusted.url}/panel/session`, { method: "DELETE", headers: { cookie, "x-forwarded-proto": "https" } });
    assert.match(out.headers.get("set-cookie") ?? "", /^gs_session=; Path=\/; Max-Age=0; HttpOnly; SameSite=Strict; Secure$/);
    const viaHttp = await signInVia(trusted, { "x-forwarded-proto": "http" });
    assert.doesNotMatch(viaHttp.headers.get("set-cookie") ?? "", /Secure/);

    const elsewhere = await started({ TRUST_PROXY: "10.0.0.0/8" });
    const spoofed = await signInVia(elsewhere, { "x-forwarded-proto": "https" });
    assert.equal(spoofed.status, 200);
    assert.doesNotMatch(spoofed.headers.get("set-cookie") ?? "", /Secure/, "a peer that is not a trusted proxy cannot claim HTTPS");
  });

  it("when PUBLIC_BASE_URL is https, then the cookie is Secure even over the plain hop from the proxy", async () => {
    const service = await started({ PUBLIC_BASE_URL: "https://generation.example.com" });
    const signed = await signInVia(service, {});
    assert.equal(signed.status, 200);
    assert.match(signed.headers.get("set-cookie") ?? "", /^gs_session=gps1\.[^;]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Strict; Secure$/);
  });

  it("when TRUST_PROXY is a hop count or not an address, then the configuration is refused; addresses, CIDRs and range names are taken", () => {
    // A signing secret of its own: loading the configuration then writes nothing into DATA_DIR.
    const env = { DATA_DIR: join(tmpdir(), "unused-trust-proxy"), URL_SIGNING_SECRET: "a secret for this check only" };
    for (const value of ["2", "proxy.example"]) assert.throws(() => loadConfig({ ...env, TRUST_PROXY: value }));
    assert.deepEqual(loadConfig({ ...env, TRUST_PROXY: "127.0.0.1, 10.0.0.0/8,loopback" }).trustProxy, ["127.0.0.1", "10.0.0.0/8", "loopback"]);
    assert.equal(loadConfig(env).trustProxy, false, "off by default");
  });
});
