// backends: embedded, real
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { loadConfig } from "../../src/config/config.js";
import { startService, type RunningService } from "../../src/runtime/start-service.js";
import { captureLog, type LogLine } from "../support/capture-log.js";
import { ADMIN_TOKEN, BACKEND, call, createCustomer, eventually, finishedJob, realBackendEnv, type Customer } from "../support/harness.js";
import { ownerToken, signIn } from "../support/panel-helpers.js";
import { secretsIn } from "../support/scan-logs.js";
import { Receiver } from "../support/webhook-receiver.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const VENDOR = "/api/aimodel/v1beta";
const PINO_ERROR = 50;

/**
 * The one log, read as an operator reads it: a service at debug, driven
 * with every kind of secret (admin token, API keys in each place a client
 * puts them, owner token and panel session, webhook secrets, signed result
 * URLs), with client mistakes and a failing webhook receiver.
 */
describe(`the service's log at debug, after traffic carrying every kind of secret (${BACKEND} backend)`, () => {
  let running: RunningService;
  let dataDir: string;
  let lines: LogLine[];
  let customer: Customer;
  const secrets: [string, string][] = [];
  let failingJob = "";
  let receiver: Receiver;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "logs-test-"));
    const log = captureLog("debug");
    lines = log.lines;
    const config = loadConfig({
      HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir, SIMULATED_LATENCY_MS: "20", ALLOW_PRIVATE_URLS: "true",
      WEBHOOK_RETRY_SCHEDULE: "20ms,40ms", WEBHOOK_TIMEOUT: "2s", DRAIN_DELAY: "0ms", SHUTDOWN_GRACE: "200ms",
      ...(BACKEND === "real" ? realBackendEnv() : {}),
    });
    running = await startService(config, { logger: log.logger });
    const service = { url: running.httpUrl };
    secrets.push(["admin token", ADMIN_TOKEN]);
    customer = await createCustomer({ ...service, dataDir, grpcUrl: "", running, close: async () => {} }, "10.00");
    secrets.push(["API key", customer.apiKey]);

    // A receiver that always fails: the delivery is retried, then exhausted (a warning naming the job and the account).
    receiver = await new Receiver(() => 500).start();
    const webhook = await call(service, "PUT", `/admin/v1/accounts/${customer.accountId}/webhook`, { admin: true, body: { url: receiver.url } });
    assert.equal(webhook.status, 200, webhook.text);
    if (webhook.json.secret) secrets.push(["webhook secret", webhook.json.secret]);

    // Keys wherever clients put them: Authorization, x-goog-api-key, ?key=.
    const job = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: { model: "aimodel-3.1-flash-image", prompt: "a red kite" } });
    assert.equal(job.status, 202, job.text);
    failingJob = job.json.job_id;
    const done = await finishedJob({ ...service, dataDir, grpcUrl: "", running, close: async () => {} }, customer.apiKey, failingJob);
    const imageUrl = new URL(done.result?.image_url ?? done.image_url ?? done.result_url);
    secrets.push(["signed-URL signature", imageUrl.searchParams.get("signature")!]);
    assert.equal((await fetch(`${running.httpUrl}${imageUrl.pathname}${imageUrl.search}`)).status, 200);
    const text = { contents: [{ role: "user", parts: [{ text: "hello" }] }] };
    assert.equal((await call(service, "POST", `${VENDOR}/models/aimodel-3.5-flash:generateContent`, { headers: { "x-goog-api-key": customer.apiKey }, body: text })).status, 200);
    assert.equal((await call(service, "POST", `${VENDOR}/models/aimodel-3.5-flash:generateContent?key=${customer.apiKey}`, { body: text })).status, 200);
    // Client mistakes: a wrong key, a wrong admin token, a bad body, an unknown path.
    assert.equal((await call(service, "GET", "/api/v1/balance", { key: "gsk_wrongwrongwrongwrongwrongwrong" })).status, 401);
    assert.equal((await call(service, "GET", "/admin/v1/prices", { headers: { authorization: "Bearer adm_wrongwrongwrongwrongwrong" } })).status, 401);
    assert.equal((await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, rawBody: "{not json", headers: { "content-type": "application/json" } })).status, 400);
    assert.equal((await call(service, "GET", `/nowhere?key=${customer.apiKey}`)).status, 404);
    // The panel: an owner token exchanged for a session cookie, then used.
    const owner = await ownerToken({ ...service, dataDir, grpcUrl: "", running, close: async () => {} }, customer.accountId);
    secrets.push(["owner token", owner.token]);
    const session = await signIn({ ...service, dataDir, grpcUrl: "", running, close: async () => {} }, owner.token);
    secrets.push(["panel session", session.cookie.split("=")[1]!]);
    assert.equal((await fetch(`${running.httpUrl}/panel/session`, { headers: { cookie: session.cookie } })).status, 200);

    await eventually(async () => lines.some((line) => line.msg.includes("exhausted")), Boolean, { timeoutMs: 15_000, what: "the delivery to be exhausted" });
  });
  after(async () => {
    await running?.close();
    await receiver?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("when every line is searched for each secret the traffic used, then none is found", () => {
    assert.ok(lines.length > 20, `${lines.length} lines`);
    const text = lines.map((line) => JSON.stringify(line)).join("\n");
    for (const [kind, secret] of secrets) assert.ok(!text.includes(secret), `the ${kind} is in the log`);
    assert.deepEqual(secretsIn(text), []);
  });

  it("when requests are logged, then each line of a request names its request_id, and a client's X-Request-Id is kept", async () => {
    const given = await call({ url: running.httpUrl }, "GET", "/api/v1/balance", { key: customer.apiKey, headers: { "x-request-id": "support-ticket-42" } });
    assert.equal(given.headers.get("x-request-id"), "support-ticket-42");
    await eventually(async () => lines.filter((line) => line.request_id === "support-ticket-42"), (found) => found.length > 0, { what: "the request's line" });
    const completed = lines.filter((line) => line.msg === "request completed");
    assert.ok(completed.length > 5);
    assert.ok(completed.every((line) => typeof line.request_id === "string" && line.request_id.length > 0));
  });

  it("when a webhook delivery is exhausted, then the warning names the job and the account", () => {
    const warning = lines.find((line) => line.msg.includes("exhausted"));
    assert.ok(warning, "an exhausted delivery is logged");
    assert.equal(warning.level, 40);
    assert.equal(warning.job_id, failingJob);
    assert.equal(warning.account_id, customer.accountId);
  });

  it("when clients make mistakes (wrong keys, a bad body, an unknown path), then nothing is logged as an error", () => {
    const errors = lines.filter((line) => line.level >= PINO_ERROR);
    assert.deepEqual(errors.map((line) => line.msg), []);
  });
});
