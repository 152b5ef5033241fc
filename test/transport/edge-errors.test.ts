// backends: embedded
import assert from "node:assert/strict";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ADMIN_TOKEN, createCustomer, eventually, type Customer, type TestService } from "../support/harness.js";
import { startProcess, type ServiceProcess } from "../support/processes.js";
import { userTurn, VENDOR } from "../support/vendor-helpers.js";

const SECRET = "SECRET-K3Y-FROM-THE-QUERY";

/** One raw HTTP/1.1 exchange: exactly these bytes, then whatever the server answers until it closes or the answer is complete. */
interface Exchange {
  readonly socket: Socket;
  received: string;
  closed: boolean;
}

async function open(url: string): Promise<Exchange> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port) });
  const exchange: Exchange = { socket, received: "", closed: false };
  socket.setEncoding("latin1");
  socket.on("data", (chunk: string) => (exchange.received += chunk));
  socket.on("error", () => {});
  socket.on("close", () => (exchange.closed = true));
  await once(socket, "connect");
  return exchange;
}

function answerOf(received: string): { status: number; json: any } | undefined {
  const end = received.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const length = Number(/\r\ncontent-length: (\d+)/i.exec(received.slice(0, end))?.[1] ?? -1);
  const body = received.slice(end + 4);
  if (length < 0 || body.length < length) return undefined;
  return { status: Number(received.slice(9, 12)), json: JSON.parse(body.slice(0, length)) };
}

async function exchange(url: string, bytes: string) {
  const connection = await open(url);
  connection.socket.write(bytes);
  const answer = await eventually(async () => answerOf(connection.received), (a) => a !== undefined, { timeoutMs: 5000, what: "an answer" });
  connection.socket.destroy();
  return { ...answer!, raw: connection.received };
}

const get = (path: string, headers = "") => `GET ${path} HTTP/1.1\r\nHost: gateway\r\n${headers}\r\n`;
const post = (path: string, headers: string, body: string) =>
  `POST ${path} HTTP/1.1\r\nHost: gateway\r\n${headers}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

/** The service's log, as the JSON lines pino wrote to stdout. */
const logLines = (service: ServiceProcess) =>
  service.output().split("\n").flatMap((line) => {
    try {
      const parsed = JSON.parse(line) as { level?: number; msg?: string };
      return typeof parsed.level === "number" ? [{ level: parsed.level, msg: parsed.msg, line }] : [];
    } catch {
      return [];
    }
  });

describe("when requests are refused by the framework, on a real process logging at debug", () => {
  let service: ServiceProcess;
  let dataDir: string;
  let customer: Customer;
  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "gen-service-edge-errors-"));
    service = await startProcess({ DATA_DIR: dataDir, LOG_LEVEL: "debug", SIMULATED_LATENCY_MS: "300", MAX_BODY_BYTES: "64KiB" });
    customer = await createCustomer(service as unknown as TestService);
  });
  after(async () => {
    await service.stop("SIGINT");
    await rm(dataDir, { recursive: true, force: true });
  });

  const platform = (status: number, code: string) => (answer: { status: number; json: any }) => {
    assert.equal(answer.status, status, JSON.stringify(answer.json));
    assert.equal(answer.json.error.code, code);
  };
  const vendor = (status: number, canonical: string, reason: string) => (answer: { status: number; json: any }) => {
    assert.equal(answer.status, status, JSON.stringify(answer.json));
    assert.equal(answer.json.error.code, status);
    assert.equal(answer.json.error.status, canonical);
    assert.equal(answer.json.error.details[0].reason, reason);
  };
  const rows: { name: string; bytes: () => string; check: (answer: { status: number; json: any }) => void }[] = [
    { name: "a path that is not valid percent-encoding (jobs)", bytes: () => get(`/api/v1/jobs/%E0%A4%A?key=${SECRET}`), check: platform(400, "invalid_url") },
    { name: "a path that is not valid percent-encoding (vendor)", bytes: () => get(`${VENDOR}/models/%E0%A4%A:generateContent?key=${SECRET}`), check: vendor(400, "INVALID_ARGUMENT", "INVALID_URL") },
    {
      // Decoded once, as every path parameter: the model id is the literal "%E0%A4%A", which no model has.
      name: "a model name percent-encoded twice (vendor)",
      bytes: () => post(`${VENDOR}/models/%25E0%25A4%25A:generateContent?key=${customer.apiKey}&x=${SECRET}`, "Content-Type: application/json\r\n", "{}"),
      check: vendor(404, "NOT_FOUND", "UNKNOWN_MODEL"),
    },
    { name: "an over-long job id", bytes: () => get(`/api/v1/jobs/${"j".repeat(300)}?key=${SECRET}`), check: platform(414, "path_parameter_too_long") },
    { name: "an over-long admin account id", bytes: () => get(`/admin/v1/accounts/${"a".repeat(300)}/balance?key=${SECRET}`), check: platform(414, "path_parameter_too_long") },
    { name: "an unknown path", bytes: () => get(`/nope?key=${SECRET}`), check: platform(404, "not_found") },
    { name: "an unknown vendor path", bytes: () => get(`${VENDOR}/nope?key=${SECRET}`), check: vendor(404, "NOT_FOUND", "NOT_FOUND") },
    { name: "a method the jobs route does not take", bytes: () => `DELETE /api/v1/generations?key=${SECRET} HTTP/1.1\r\nHost: gateway\r\n\r\n`, check: platform(404, "not_found") },
    { name: "a method the vendor route does not take", bytes: () => get(`${VENDOR}/models/aimodel-3.5-flash:generateContent?key=${SECRET}`), check: vendor(404, "NOT_FOUND", "NOT_FOUND") },
    { name: "malformed HTTP (jobs)", bytes: () => `GET /api/v1/balance?key=${SECRET} HTTP/1.1\r\nHost: gateway\r\nNo colon here\r\n\r\n`, check: platform(400, "malformed_request") },
    { name: "malformed HTTP (vendor)", bytes: () => `POST ${VENDOR}/models/x:generateContent?key=${SECRET} HTTP/1.1\r\nHost gateway\r\n\r\n`, check: vendor(400, "INVALID_ARGUMENT", "MALFORMED_REQUEST") },
    { name: "headers larger than the parser takes (vendor)", bytes: () => get(`${VENDOR}/models?key=${SECRET}`, `X-Big: ${"b".repeat(20_000)}\r\n`), check: vendor(431, "INVALID_ARGUMENT", "HEADERS_TOO_LARGE") },
    {
      name: "malformed JSON (jobs)",
      bytes: () => post(`/api/v1/generations?key=${SECRET}`, `Authorization: Bearer ${customer.apiKey}\r\nContent-Type: application/json\r\n`, '{"model": '),
      check: platform(400, "invalid_json"),
    },
    {
      name: "malformed JSON (vendor)",
      bytes: () => post(`${VENDOR}/models/aimodel-3.5-flash:generateContent?key=${customer.apiKey}&x=${SECRET}`, "Content-Type: application/json\r\n", '{"contents": '),
      check: vendor(400, "INVALID_ARGUMENT", "INVALID_JSON"),
    },
    {
      name: "a body that is not JSON (vendor)",
      bytes: () => post(`${VENDOR}/models/aimodel-3.5-flash:generateContent?key=${customer.apiKey}&x=${SECRET}`, "Content-Type: text/plain\r\n", "hello"),
      check: vendor(415, "INVALID_ARGUMENT", "UNSUPPORTED_MEDIA_TYPE"),
    },
    {
      name: "a body over MAX_BODY_BYTES (admin)",
      bytes: () => post(`/admin/v1/accounts?key=${SECRET}`, `Authorization: Bearer ${ADMIN_TOKEN}\r\nContent-Type: application/json\r\n`, `{"name":"${"n".repeat(70_000)}"}`),
      check: platform(422, "input_too_large"),
    },
    { name: "a wrong ?key= (vendor)", bytes: () => post(`${VENDOR}/models/aimodel-3.5-flash:generateContent?key=${SECRET}`, "Content-Type: application/json\r\n", "{}"), check: vendor(401, "UNAUTHENTICATED", "INVALID_API_KEY") },
  ];
  for (const row of rows) {
    it(`then ${row.name} answers in the surface's documented shape, without the query`, async () => {
      const answer = await exchange(service.url, row.bytes());
      row.check(answer);
      assert.ok(!answer.raw.includes(SECRET), `the answer echoes the query: ${answer.raw.slice(0, 300)}`);
    });
  }

  it("then no log line holds the query, and none is an error", async () => {
    // Each refusal once more (this test stands alone); each answer leaves after its log line.
    for (const row of rows) await exchange(service.url, row.bytes());
    const lines = logLines(service);
    assert.ok(lines.length > rows.length, "the service logged the requests");
    assert.deepEqual(lines.filter((l) => l.line.includes(SECRET)).map((l) => l.line), []);
    assert.deepEqual(lines.filter((l) => l.level >= 50).map((l) => l.line), []);
  });

  it("then clients that hang up mid-body or mid-answer are logged at debug without a stack, never as errors", async () => {
    const wentAway = () => logLines(service).filter((l) => l.msg === "client went away").length;
    const before = wentAway();
    const json = "Content-Type: application/json\r\n";
    // Mid-body, small (jobs) and large (vendor, holding an upload slot).
    for (const head of [
      `POST /api/v1/generations HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${customer.apiKey}\r\n${json}Content-Length: 10000\r\n\r\n{"model": "aimo`,
      `POST ${VENDOR}/models/aimodel-3.5-flash:generateContent HTTP/1.1\r\nHost: gateway\r\nx-vendor-api-key: ${customer.apiKey}\r\n${json}Content-Length: 5000000\r\n\r\n{"contents": [`,
    ]) {
      const connection = await open(service.url);
      connection.socket.write(head);
      connection.socket.write(" ".repeat(1000));
      connection.socket.destroy();
    }
    // Mid-answer: a synchronous call still being produced, and an SSE stream after its first event.
    const slow = JSON.stringify(userTurn("[simulate:slow] a long answer"));
    const waiting = await open(service.url);
    waiting.socket.write(post(`${VENDOR}/models/aimodel-3.5-flash:generateContent`, `x-vendor-api-key: ${customer.apiKey}\r\n${json}`, slow));
    const streaming = await open(service.url);
    streaming.socket.write(post(`${VENDOR}/models/aimodel-3.5-flash:streamGenerateContent?alt=sse`, `x-vendor-api-key: ${customer.apiKey}\r\n${json}`, slow));
    await eventually(async () => streaming.received, (text) => text.includes("data: "), { timeoutMs: 10_000, what: "the first SSE event" });
    waiting.socket.destroy();
    streaming.socket.destroy();

    await eventually(async () => wentAway() - before, (n) => n >= 3, { timeoutMs: 10_000, what: "three 'client went away' lines" });
    // The service still answers.
    assert.equal((await fetch(`${service.url}/livez`)).status, 200);
    const lines = logLines(service);
    const gone = lines.filter((l) => l.msg === "client went away");
    for (const line of gone) {
      assert.equal(line.level, 20, line.line);
      assert.ok(!/"stack"|"err"/.test(line.line), `a stack or error object: ${line.line}`);
    }
    assert.deepEqual(lines.filter((l) => l.level >= 50).map((l) => l.line), []);
  });
});
