// backends: embedded, real
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { ADMIN_TOKEN, createCustomer, eventually, jsonOrUndefined, startTestService, type Customer, type TestService } from "../support/harness.js";
import { bearer, errorDetailOf, grpcAddress, loadGrpcPackage, rpcError, unary } from "../support/rpc-helpers.js";
import { spawnServiceChild } from "../support/service-child.js";
import { connectH2, rawCall } from "../transport/edge-helpers.js";
import { ownerToken, rpc, signIn } from "../support/panel-helpers.js";

/** Linux routes all of 127/8 to lo: a request from here is another client address to the service. */
const OTHER_CLIENT = "127.0.0.2";
const WRONG_ADMIN_TOKEN = "wrong-admin-token-0123456789abcdef";

interface Answer {
  readonly status: number;
  readonly retryAfter: string | undefined;
  readonly json: any;
}

/** One HTTP/1.1 request from `localAddress` (the service sees that client address). */
async function request(
  service: TestService, method: string, path: string, headers: Record<string, string> = {}, body?: string, localAddress = "127.0.0.1",
): Promise<Answer> {
  const url = new URL(path, service.url);
  const outgoing = http.request({
    host: url.hostname, port: url.port, path: url.pathname + url.search, method, localAddress, agent: false,
    headers: body === undefined ? headers : { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) },
  });
  outgoing.end(body);
  const [response] = (await once(outgoing, "response")) as [http.IncomingMessage];
  const chunks: Buffer[] = [];
  for await (const chunk of response) chunks.push(chunk as Buffer);
  const retryAfter = response.headers["retry-after"];
  return { status: response.statusCode!, retryAfter: typeof retryAfter === "string" ? retryAfter : undefined, json: jsonOrUndefined(Buffer.concat(chunks).toString("utf8")) };
}

const asAdmin = (token: string) => ({ authorization: `Bearer ${token}` });

describe("credential guessing from one client address (AUTH_FAILURE_LIMIT, AUTH_FAILURE_WINDOW)", () => {
  const LIMIT = 6;
  let service: TestService;
  let customer: Customer;
  let adminRpc: grpc.Client;
  before(async () => {
    // A window far longer than the test: nothing here may depend on it ending.
    service = await startTestService({ AUTH_FAILURE_LIMIT: String(LIMIT), AUTH_FAILURE_WINDOW: "1h" });
    customer = await createCustomer(service);
    const pkg = loadGrpcPackage();
    adminRpc = new pkg.AdminService!(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
  });
  after(async () => {
    adminRpc?.close();
    await service?.close();
  });

  it("when an address makes AUTH_FAILURE_LIMIT failed checks across the admin API, the panel sign-in, API keys and the core port, then its next check is 429 with Retry-After, even with the right credential; successes counted nothing", async () => {
    // Successful checks in between count nothing.
    assert.equal((await request(service, "GET", "/admin/v1/prices", asAdmin(ADMIN_TOKEN))).status, 200);
    const failures = [
      await request(service, "GET", "/admin/v1/prices", asAdmin(WRONG_ADMIN_TOKEN)),
      await request(service, "POST", "/admin/v1/accounts", asAdmin(WRONG_ADMIN_TOKEN), JSON.stringify({ name: "x", balance: "1.00" })),
      await request(service, "POST", "/panel/session", asAdmin(WRONG_ADMIN_TOKEN)),
      await request(service, "GET", "/api/v1/balance", { authorization: "Bearer gsk_not-a-key" }),
      await request(service, "GET", "/api/aimodel/v1beta/models?key=not-a-key"),
    ];
    assert.deepEqual(failures.map((answer) => answer.status), [401, 401, 401, 401, 401]);
    assert.equal((await request(service, "GET", "/api/v1/balance", { authorization: `Bearer ${customer.apiKey}` })).status, 200);
    const overRpc = await rpcError(unary(adminRpc, "ListPrices", {}, bearer(WRONG_ADMIN_TOKEN)));
    assert.equal(overRpc.code, grpc.status.UNAUTHENTICATED);

    // The budget is spent: the right admin token is refused before it is looked at, on every surface.
    const admin = await request(service, "GET", "/admin/v1/prices", asAdmin(ADMIN_TOKEN));
    assert.equal(admin.status, 429);
    assert.equal(admin.json.error.code, "too_many_failed_credentials");
    assert.ok(Number(admin.retryAfter) >= 1 && Number(admin.retryAfter) <= 3600, `Retry-After ${admin.retryAfter}`);
    const withBody = await request(service, "POST", "/admin/v1/accounts", asAdmin(ADMIN_TOKEN), JSON.stringify({ name: "late", balance: "1.00" }));
    assert.equal(withBody.status, 429);
    assert.equal((await request(service, "POST", "/panel/session", asAdmin(ADMIN_TOKEN))).status, 429);
    assert.equal((await request(service, "GET", "/api/v1/balance", { authorization: `Bearer ${customer.apiKey}` })).status, 429);
    const vendor = await request(service, "GET", `/api/aimodel/v1beta/models?key=${customer.apiKey}`);
    assert.equal(vendor.status, 429);
    assert.equal(vendor.json.error.status, "RESOURCE_EXHAUSTED");
    assert.ok(Number(vendor.retryAfter) >= 1);
    const connect = await request(service, "POST", "/generation.v1.GenerationService/GetBalance", { authorization: `Bearer ${customer.apiKey}` }, "{}");
    assert.equal(connect.status, 429);
    assert.equal(connect.json.code, "resource_exhausted");
    assert.ok(Number(connect.retryAfter) >= 1);
    const overGrpc = await rpcError(unary(adminRpc, "ListPrices", {}, bearer(ADMIN_TOKEN)));
    assert.equal(overGrpc.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.equal(errorDetailOf(overGrpc).details[0]?.reason, "too_many_failed_credentials");
    assert.ok(errorDetailOf(overGrpc).details[0]!.retryAfterSeconds >= 1);
  });

  it("when another address makes calls meanwhile, then it is unaffected: its right credentials pass and its wrong ones are 401", async () => {
    assert.equal((await request(service, "GET", "/admin/v1/prices", asAdmin(ADMIN_TOKEN))).status, 429, "127.0.0.1 is still locked out");
    assert.equal((await request(service, "GET", "/admin/v1/prices", asAdmin(ADMIN_TOKEN), undefined, OTHER_CLIENT)).status, 200);
    assert.equal((await request(service, "POST", "/panel/session", asAdmin(ADMIN_TOKEN), undefined, OTHER_CLIENT)).status, 200);
    assert.equal((await request(service, "GET", "/api/v1/balance", { authorization: `Bearer ${customer.apiKey}` }, undefined, OTHER_CLIENT)).status, 200);
    assert.equal((await request(service, "GET", "/admin/v1/prices", asAdmin(WRONG_ADMIN_TOKEN), undefined, OTHER_CLIENT)).status, 401);
  });

  it("when a call presents no credential at all, then it is no guess: it is 401 and counts nothing", async () => {
    const limited = await startTestService({ AUTH_FAILURE_LIMIT: "2", AUTH_FAILURE_WINDOW: "1h" });
    try {
      for (let i = 0; i < 5; i++) assert.equal((await request(limited, "GET", "/api/v1/balance")).status, 401);
      assert.equal((await request(limited, "GET", "/admin/v1/prices", asAdmin(ADMIN_TOKEN))).status, 200);
    } finally {
      await limited.close();
    }
  });
});

describe("refusals that are no guess", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ AUTH_FAILURE_LIMIT: "2", AUTH_FAILURE_WINDOW: "1h" });
  });
  after(async () => service?.close());

  it("when a panel session that was valid is refused (its owner token revoked), then its calls are 401 and count nothing", async () => {
    const customer = await createCustomer(service);
    const { token, id } = await ownerToken(service, customer.accountId);
    const owner = await signIn(service, token);
    assert.equal((await request(service, "DELETE", `/admin/v1/keys/${id}`, asAdmin(ADMIN_TOKEN))).status, 200);
    for (let i = 0; i < 4; i++) {
      const refused = await rpc(service, "AccountService/GetAccount", {}, { cookie: owner.cookie, "x-csrf-token": owner.csrf });
      assert.equal(refused.status, 401);
    }
    assert.equal((await request(service, "GET", "/admin/v1/prices", asAdmin(ADMIN_TOKEN))).status, 200);
  });
});

describe("credential guessing behind a trusted proxy (TRUST_PROXY)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ AUTH_FAILURE_LIMIT: "3", AUTH_FAILURE_WINDOW: "1h", TRUST_PROXY: "127.0.0.1" });
  });
  after(() => service?.close());

  it("when one client behind the proxy guesses, then that client is locked out and another client behind the same proxy is not", async () => {
    const from = (client: string) => ({ ...asAdmin(WRONG_ADMIN_TOKEN), "x-forwarded-for": client });
    for (let i = 0; i < 3; i++) assert.equal((await request(service, "GET", "/admin/v1/prices", from("203.0.113.7"))).status, 401);
    const locked = await request(service, "GET", "/admin/v1/prices", { ...asAdmin(ADMIN_TOKEN), "x-forwarded-for": "203.0.113.7" });
    assert.equal(locked.status, 429, JSON.stringify(locked.json));
    const neighbour = await request(service, "GET", "/admin/v1/prices", { ...asAdmin(ADMIN_TOKEN), "x-forwarded-for": "203.0.113.8" });
    assert.equal(neighbour.status, 200, "the proxy's other clients are not locked out with the guesser");
  });

  it("when the peer is not a trusted proxy, then its X-Forwarded-For is ignored and the peer itself is counted", async () => {
    for (let i = 0; i < 3; i++) {
      const guess = await request(service, "GET", "/admin/v1/prices", { ...asAdmin(WRONG_ADMIN_TOKEN), "x-forwarded-for": `198.51.100.${i}` }, undefined, OTHER_CLIENT);
      assert.equal(guess.status, 401);
    }
    const locked = await request(service, "GET", "/admin/v1/prices", { ...asAdmin(ADMIN_TOKEN), "x-forwarded-for": "198.51.100.99" }, undefined, OTHER_CLIENT);
    assert.equal(locked.status, 429, "a client cannot pick a fresh address by a header");
  });
});

describe("the end of an address's window of failed credential checks", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ AUTH_FAILURE_LIMIT: "2", AUTH_FAILURE_WINDOW: "1500ms" });
  });
  after(async () => service?.close());

  it("when the window passes, then checks resume: the right credential passes and failures count afresh", async () => {
    for (let i = 0; i < 2; i++) assert.equal((await request(service, "GET", "/admin/v1/prices", asAdmin(WRONG_ADMIN_TOKEN))).status, 401);
    const refused = await request(service, "GET", "/admin/v1/prices", asAdmin(ADMIN_TOKEN));
    assert.equal(refused.status, 429);
    assert.ok(Number(refused.retryAfter) >= 1 && Number(refused.retryAfter) <= 2, `Retry-After ${refused.retryAfter}`);
    await eventually(() => request(service, "GET", "/admin/v1/prices", asAdmin(ADMIN_TOKEN)), (answer) => answer.status === 200, {
      timeoutMs: 10_000, intervalMs: 100, what: "the window to pass",
    });
    assert.equal((await request(service, "GET", "/admin/v1/prices", asAdmin(WRONG_ADMIN_TOKEN))).status, 401);
  });
});

describe("credential guessing through a gateway in front of a remote core (CORE_URL)", () => {
  const SECRET = "shared-url-signing-secret-of-the-deployment";
  let core: TestService;
  let gateway: TestService;
  let customer: Customer;
  before(async () => {
    core = await startTestService({ AUTH_FAILURE_LIMIT: "3", AUTH_FAILURE_WINDOW: "1h", URL_SIGNING_SECRET: SECRET });
    gateway = await startTestService({ CORE_URL: core.grpcUrl, AUTH_FAILURE_LIMIT: "3", AUTH_FAILURE_WINDOW: "1h", URL_SIGNING_SECRET: SECRET });
    customer = await createCustomer(core);
  });
  after(async () => {
    await gateway?.close();
    await core?.close();
  });

  it("when a client guesses keys through the gateway, then the core locks out that client, not the gateway; a header naming another address does not get it out", async () => {
    for (let i = 0; i < 3; i++) {
      assert.equal((await request(gateway, "GET", "/api/v1/balance", { authorization: `Bearer gsk_guess-${i}` }, undefined, OTHER_CLIENT)).status, 401);
    }
    const right = { authorization: `Bearer ${customer.apiKey}` };
    assert.equal((await request(gateway, "GET", "/api/v1/balance", right, undefined, OTHER_CLIENT)).status, 429);
    // The gateway reaches the core from 127.0.0.1: its other clients still pass.
    assert.equal((await request(gateway, "GET", "/api/v1/balance", right)).status, 200);
    // Straight to the core port, naming another client in the gateway's header (unsigned): still the connection's address.
    const session = connectH2(core.grpcUrl, OTHER_CLIENT);
    try {
      const forged = await rawCall(session, "/generation.v1.GenerationService/GetBalance", {
        "content-type": "application/json", authorization: `Bearer ${customer.apiKey}`, "x-gateway-client": "127.0.0.9 forged",
      }, [Buffer.from("{}")]);
      assert.equal(forged.status, 429);
      assert.equal(JSON.parse(forged.body.toString("utf8")).code, "resource_exhausted");
    } finally {
      session.close();
    }
  });
});

describe("an admin token shorter than 32 characters", () => {
  it("when ADMIN_TOKEN is shorter than 32 characters, then the service refuses to start: it exits by itself with code 1", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "gen-weak-admin-"));
    try {
      const child = spawnServiceChild({ ADMIN_TOKEN: "a".repeat(31), DATA_DIR: dataDir });
      child.stdout!.resume();
      child.stderr!.resume();
      // A service that starts never exits by itself: the wait is bounded, so that case fails rather than hangs.
      const [code, signal] = (await once(child, "exit", { signal: AbortSignal.timeout(60_000) })) as [number | null, NodeJS.Signals | null];
      assert.deepEqual({ code, signal }, { code: 1, signal: null });
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it("when ALLOW_WEAK_ADMIN_TOKEN=true, then it starts with one, for development", async () => {
    const weak = await startTestService({ ADMIN_TOKEN: "dev", ALLOW_WEAK_ADMIN_TOKEN: "true" });
    try {
      assert.equal((await request(weak, "GET", "/admin/v1/prices", asAdmin("dev"))).status, 200);
    } finally {
      await weak.close();
    }
  });
});
