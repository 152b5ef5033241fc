// backends: embedded
import assert from "node:assert/strict";
import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { createParser } from "eventsource-parser";
import { call, createCustomer, eventually, finishedJob, startTestService, type Customer, type TestService } from "../support/harness.js";
import { userTurn, VENDOR } from "../support/vendor-helpers.js";

/** A raw TCP connection to the gateway: what it received, and whether the server closed it. */
interface RawConnection {
  readonly socket: Socket;
  readonly openedAt: number;
  received: string;
  closedAt?: number;
}

async function openRaw(url: string, localAddress?: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port), ...(localAddress ? { localAddress } : {}) });
  const connection: RawConnection = { socket, openedAt: Date.now(), received: "" };
  socket.setEncoding("latin1");
  socket.on("data", (chunk: string) => (connection.received += chunk));
  socket.on("error", () => {});
  socket.on("close", () => (connection.closedAt = Date.now()));
  await once(socket, "connect");
  return connection;
}

const statusOf = (connection: RawConnection) => Number(/^HTTP\/1\.1 (\d{3})/.exec(connection.received)?.[1] ?? 0);
const bodyOf = (connection: RawConnection) => JSON.parse(connection.received.slice(connection.received.indexOf("\r\n\r\n") + 4));

describe("when one client address holds thousands of slow connections", () => {
  const ATTEMPTS = 2000;
  const CAP = 1500;
  const REQUEST_TIMEOUT_MS = 10_000;
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService({
      HTTP_HEADERS_TIMEOUT: "1s",
      HTTP_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`,
      MAX_CONNECTIONS_PER_CLIENT: String(CAP),
    });
    customer = await createCustomer(service);
  });
  after(() => service.close());

  it("then /readyz and a job from another address keep answering, the slow requests are cut by the request timeout, and connections beyond the per-client cap are refused at once", async (t) => {
    // The attack: headers announcing a body (with an ordinary key), then one byte every 300 ms, from 127.0.0.2.
    const head =
      `POST /api/v1/generations HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${customer.apiKey}\r\n` +
      "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{";
    const started = Date.now();
    const attackers: RawConnection[] = [];
    for (let batch = 0; batch < ATTEMPTS; batch += 100) {
      const opened = await Promise.all(Array.from({ length: Math.min(100, ATTEMPTS - batch) }, () => openRaw(service.url, "127.0.0.2")));
      for (const connection of opened) {
        connection.socket.write(head);
        attackers.push(connection);
      }
    }
    const openedInMs = Date.now() - started;
    t.diagnostic(`${ATTEMPTS} connections opened in ${openedInMs} ms`);
    // Nothing is cut before the request timeout, so exactly the connections beyond the cap are refused.
    assert.ok(openedInMs < REQUEST_TIMEOUT_MS - 3000, `opening took ${openedInMs} ms: too slow for this test's timing`);
    const trickle = setInterval(() => {
      for (const connection of attackers) if (connection.closedAt === undefined && !connection.received) connection.socket.write(" ");
    }, 300);
    try {
      // Refused at once: exactly those beyond the cap, with 429 and Retry-After, and closed.
      const refused = await eventually(
        async () => attackers.filter((c) => statusOf(c) === 429 && c.closedAt !== undefined),
        (list) => list.length >= ATTEMPTS - CAP,
        { timeoutMs: 5000, what: "the connections beyond the cap to be refused" },
      );
      assert.equal(refused.length, ATTEMPTS - CAP);
      assert.match(refused[0]!.received, /\r\nRetry-After: 1\r\n/i);
      assert.equal(bodyOf(refused[0]!).error.code, "too_many_connections");

      // Meanwhile another client is served: /readyz and a real job.
      const latencies: number[] = [];
      for (let i = 0; i < 20; i++) {
        const begun = performance.now();
        const ready = await fetch(`${service.url}/readyz`, { signal: AbortSignal.timeout(2000) });
        assert.equal(ready.status, 200);
        await ready.arrayBuffer();
        latencies.push(performance.now() - begun);
      }
      latencies.sort((a, b) => a - b);
      t.diagnostic(`/readyz during the attack: p50 ${latencies[10]!.toFixed(1)} ms, max ${latencies[19]!.toFixed(1)} ms`);
      const created = await call(service, "POST", "/api/v1/generations", {
        key: customer.apiKey,
        body: { model: "aimodel-2.5-flash-image", prompt: "a lighthouse during a storm" },
      });
      assert.equal(created.status, 202, created.text);
      assert.equal((await finishedJob(service, customer.apiKey, created.json.job_id)).status, "done");
      const stillOpen = attackers.filter((c) => c.closedAt === undefined).length;
      assert.equal(stillOpen, CAP, "the accepted slow connections are still open while the legitimate client is served");

      // The slow ones are cut by HTTP_REQUEST_TIMEOUT (Node checks about every 250 ms here), each with a 408.
      const accepted = attackers.filter((c) => statusOf(c) !== 429);
      await eventually(async () => accepted.filter((c) => c.closedAt === undefined).length, (open) => open === 0, {
        timeoutMs: REQUEST_TIMEOUT_MS + 5000, intervalMs: 200, what: "the slow connections to be closed",
      });
      for (const connection of accepted) {
        assert.equal(statusOf(connection), 408, connection.received);
        assert.ok(connection.closedAt! - connection.openedAt >= REQUEST_TIMEOUT_MS - 100, "not cut before the request timeout");
      }
      assert.equal(bodyOf(accepted[0]!).error.code, "request_timeout");
      const lifetimes = accepted.map((c) => c.closedAt! - c.openedAt).sort((a, b) => a - b);
      t.diagnostic(`slow connections closed after ${lifetimes[0]}–${lifetimes.at(-1)} ms`);
    } finally {
      clearInterval(trickle);
      for (const connection of attackers) connection.socket.destroy();
    }
  });
});

describe("when a client sends its headers or its body too slowly", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ HTTP_HEADERS_TIMEOUT: "500ms", HTTP_REQUEST_TIMEOUT: "1500ms" });
  });
  after(() => service.close());

  it("then HTTP_HEADERS_TIMEOUT and HTTP_REQUEST_TIMEOUT close the connection with 408, in the vendor's shape on its surface, never echoing the query", async () => {
    const customer = await createCustomer(service);
    // Headers that never end: no path is known yet, so the platform's shape.
    const slowHeaders = await openRaw(service.url);
    slowHeaders.socket.write("POST /api/v1/generations?key=SECRET-IN-QUERY HTTP/1.1\r\nHost: gateway\r\n");
    // Headers complete, the body trickles: the vendor surface's shape.
    const slowBody = await openRaw(service.url);
    slowBody.socket.write(
      `POST ${VENDOR}/models/aimodel-3.5-flash:generateContent?key=${customer.apiKey}&x=SECRET-IN-QUERY HTTP/1.1\r\n` +
        "Host: gateway\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
    );
    const trickle = setInterval(() => {
      if (slowHeaders.closedAt === undefined) slowHeaders.socket.write("X-Slow: 1\r\n");
      if (slowBody.closedAt === undefined) slowBody.socket.write(" ");
    }, 100);
    try {
      await eventually(async () => [slowHeaders.closedAt, slowBody.closedAt], (closed) => closed.every((at) => at !== undefined), {
        timeoutMs: 5000, what: "both connections to be closed",
      });
    } finally {
      clearInterval(trickle);
    }
    assert.equal(statusOf(slowHeaders), 408);
    assert.equal(bodyOf(slowHeaders).error.code, "request_timeout");
    assert.ok(slowHeaders.closedAt! - slowHeaders.openedAt < 1500, "cut by the headers timeout, before the request timeout");
    assert.equal(statusOf(slowBody), 408);
    assert.equal(bodyOf(slowBody).error.status, "DEADLINE_EXCEEDED");
    assert.equal(bodyOf(slowBody).error.details[0].reason, "REQUEST_TIMEOUT");
    assert.ok(slowBody.closedAt! - slowBody.openedAt >= 1400, "the body had until the request timeout");
    assert.ok(!slowHeaders.received.includes("SECRET") && !slowBody.received.includes("SECRET"));
  });
});

describe("when connections are idle", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({
      HTTP_IDLE_TIMEOUT: "300ms",
      HTTP_KEEP_ALIVE_TIMEOUT: "200ms",
      HTTP_HEADERS_TIMEOUT: "20s",
      HTTP_REQUEST_TIMEOUT: "30s",
      SIMULATED_LATENCY_MS: "4000",
    });
  });
  after(() => service.close());

  it("then a connection that sends nothing is closed after HTTP_IDLE_TIMEOUT", async () => {
    const silent = await openRaw(service.url);
    await eventually(async () => silent.closedAt, (at) => at !== undefined, { timeoutMs: 3000, what: "the idle connection to close" });
    assert.ok(silent.closedAt! - silent.openedAt >= 250, `closed after ${silent.closedAt! - silent.openedAt} ms`);
  });

  it("then a kept-alive connection is closed once HTTP_KEEP_ALIVE_TIMEOUT passed after its answer", async () => {
    const connection = await openRaw(service.url);
    connection.socket.write("GET /livez HTTP/1.1\r\nHost: gateway\r\n\r\n");
    await eventually(async () => statusOf(connection), (status) => status === 200, { timeoutMs: 3000, what: "the /livez answer" });
    const answeredAt = Date.now();
    // Node closes at the keep-alive timeout plus its one-second grace.
    await eventually(async () => connection.closedAt, (at) => at !== undefined, { timeoutMs: 4000, what: "the kept-alive connection to close" });
    assert.ok(connection.closedAt! - answeredAt < 3000);
  });

  it("then neither a synchronous text call nor an SSE stream is cut while its answer is being produced", async () => {
    const customer = await createCustomer(service, "10.00");
    const headers = { "x-vendor-api-key": customer.apiKey, "content-type": "application/json" };
    const body = JSON.stringify(userTurn("Write a long poem about the idle timeout of a gateway"));
    const [plain, streamed] = await Promise.all([
      (async () => {
        const begun = Date.now();
        const response = await fetch(`${service.url}${VENDOR}/models/aimodel-3.5-flash:generateContent`, { method: "POST", headers, body });
        return { status: response.status, json: await response.json(), tookMs: Date.now() - begun };
      })(),
      (async () => {
        const response = await fetch(`${service.url}${VENDOR}/models/aimodel-3.5-flash:streamGenerateContent?alt=sse`, { method: "POST", headers, body });
        const events: { at: number; data: unknown }[] = [];
        const parser = createParser({ onEvent: (event) => events.push({ at: Date.now(), data: JSON.parse(event.data) }) });
        const decoder = new TextDecoder();
        for await (const chunk of response.body!) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
        return { status: response.status, events };
      })(),
    ]);
    assert.equal(plain.status, 200, JSON.stringify(plain.json));
    assert.ok(plain.tookMs > 300, "the call took longer than the idle timeout");
    assert.ok((plain.json as { usageMetadata?: unknown }).usageMetadata);
    assert.equal(streamed.status, 200);
    const last = streamed.events.at(-1)!.data as { candidates?: { finishReason?: string }[] };
    assert.equal(last.candidates?.[0]?.finishReason, "STOP", "the stream ran to its end");
    const gaps = streamed.events.slice(1).map((event, i) => event.at - streamed.events[i]!.at);
    assert.ok(Math.max(...gaps) > 300, `a silence between events longer than the idle timeout (gaps ${gaps.join(", ")} ms)`);
  });
});

describe("when MAX_CONNECTIONS connections are open", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ MAX_CONNECTIONS: "20" });
  });
  after(() => service.close());

  it("then the next one is closed at once, and one is accepted again once another closed", async () => {
    const held = await Promise.all(Array.from({ length: 20 }, () => openRaw(service.url, "127.0.0.3")));
    // Every one of them is served (a full cap, not one less).
    for (const connection of held) connection.socket.write("GET /livez HTTP/1.1\r\nHost: gateway\r\n\r\n");
    await eventually(async () => held.filter((c) => statusOf(c) === 200).length, (n) => n === 20, { timeoutMs: 5000, what: "20 answers" });
    const extra = await openRaw(service.url, "127.0.0.4");
    extra.socket.write("GET /livez HTTP/1.1\r\nHost: gateway\r\n\r\n");
    await eventually(async () => extra.closedAt, (at) => at !== undefined, { timeoutMs: 3000, what: "the extra connection to be closed" });
    assert.equal(extra.received, "", "closed without an answer");

    held[0]!.socket.destroy();
    await eventually(
      async () => {
        const again = await openRaw(service.url, "127.0.0.4");
        again.socket.write("GET /livez HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n");
        await once(again.socket, "close");
        return statusOf(again);
      },
      (status) => status === 200,
      { timeoutMs: 3000, what: "a new connection to be served" },
    );
    for (const connection of held) connection.socket.destroy();
  });
});
