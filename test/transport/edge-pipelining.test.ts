// backends: embedded
import assert from "node:assert/strict";
import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { parseExposition, valueOf } from "../support/exposition.js";
import { call, eventually, startTestService, type TestService } from "../support/harness.js";

const DEPTH = 4;
const PIPELINED = 1_000;

async function openSocket(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port) });
  socket.on("error", () => {});
  await once(socket, "connect");
  return socket;
}

/** What the gateway reports of GET /openapi.json: answered so far, and being answered (the scrape itself left out). */
async function openApiRequests(service: TestService): Promise<{ answered: number; inFlight: number }> {
  const samples = parseExposition((await call(service, "GET", "/metrics")).text);
  return {
    answered: valueOf(samples, "http_server_requests_total", { route: "/openapi.json" }),
    // The scrape is a request in flight too.
    inFlight: valueOf(samples, "http_server_requests_in_flight") - 1,
  };
}

describe("when a connection pipelines a thousand requests and never reads its answers", () => {
  let service: TestService;
  let attacker: Socket;
  before(async () => {
    service = await startTestService({ MAX_PIPELINED_REQUESTS: String(DEPTH) });
    attacker = await openSocket(service.url);
    // Never read: the answers pile up on the server's side.
    attacker.pause();
    attacker.write("GET /openapi.json HTTP/1.1\r\nHost: gateway\r\n\r\n".repeat(PIPELINED));
  });
  after(async () => {
    attacker.destroy();
    await service.close();
  });

  it("then at most MAX_PIPELINED_REQUESTS of its requests are being answered at once and most are never handled", async () => {
    let previous = { answered: -1, inFlight: -1 };
    // Settled: the same counts twice in a row, with the connection's whole depth in use.
    const settled = await eventually(
      async () => {
        const before = previous;
        previous = await openApiRequests(service);
        return { before, now: previous };
      },
      ({ before, now }) => now.inFlight === DEPTH && now.answered === before.answered && now.inFlight === before.inFlight,
      { timeoutMs: 5_000, intervalMs: 50, what: "the pipelined requests to stop being handled" },
    );
    // The kernel's socket buffers take some answers whole (a few MB on loopback); the rest are never produced.
    assert.ok(settled.now.answered + settled.now.inFlight < PIPELINED / 4, `${settled.now.answered} answered and ${settled.now.inFlight} in flight`);
    assert.equal((await call(service, "GET", "/readyz")).status, 200);
  });

  it("then once it closes, the in-flight gauge returns to 0", async () => {
    attacker.destroy();
    const ended = await eventually(() => openApiRequests(service), (counts) => counts.inFlight === 0, {
      timeoutMs: 5_000, what: "the in-flight gauge to return to 0",
    });
    assert.equal(ended.inFlight, 0);
  });
});

describe("when a client pipelines more requests than MAX_PIPELINED_REQUESTS and reads its answers", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ MAX_PIPELINED_REQUESTS: String(DEPTH) });
  });
  after(() => service.close());

  it("then every request is answered, in the order sent", async () => {
    const socket = await openSocket(service.url);
    let received = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (received += chunk));
    const count = DEPTH * 10;
    const ids = Array.from({ length: count }, (_, i) => `pipelined-${i}`);
    socket.write(ids.map((id) => `GET /livez HTTP/1.1\r\nHost: gateway\r\nX-Request-Id: ${id}\r\n\r\n`).join(""));
    const answeredIds = await eventually(
      async () => [...received.matchAll(/^x-request-id: (\S+)\r$/gim)].map((match) => match[1]),
      (list) => list.length === count,
      { timeoutMs: 5_000, what: "every pipelined request's answer" },
    );
    socket.destroy();
    assert.deepEqual(answeredIds, ids);
    assert.equal(received.match(/HTTP\/1\.1 200 /g)?.length, count);
  });
  it("then a client that stops reading until the server has stopped too, and reads again, gets every large answer", async () => {
    const socket = await openSocket(service.url);
    let received = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (received += chunk));
    socket.pause();
    const count = DEPTH * 10;
    socket.write("GET /openapi.json HTTP/1.1\r\nHost: gateway\r\n\r\n".repeat(count));
    // Both pauses hold: the socket's writes are not draining (Node's) and requests wait behind the depth (ours).
    await eventually(() => openApiRequests(service), (counts) => counts.inFlight === DEPTH, {
      timeoutMs: 5_000, what: "the connection's depth to fill",
    });
    socket.resume();
    const statuses = await eventually(
      async () => received.match(/HTTP\/1\.1 200 /g)?.length ?? 0,
      (answered) => answered === count,
      { timeoutMs: 10_000, what: "every large answer" },
    );
    socket.destroy();
    assert.equal(statuses, count);
  });
});
