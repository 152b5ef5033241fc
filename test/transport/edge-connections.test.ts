// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { once } from "node:events";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ADMIN_TOKEN, eventually, startTestService, type TestService } from "../support/harness.js";
import { bearer, grpcAddress, loadGrpcPackage, unary } from "../support/rpc-helpers.js";
import { connectH2, envelope, grpcStatusOf, rawCall, type RawAnswer } from "./edge-helpers.js";
import { REPO_ROOT } from "../support/repo.js";

const PROTO_ROOT = join(REPO_ROOT, "proto");
/** The attackers' source address: Linux routes all of 127/8 to lo, so it is another client to the server. */
const ATTACKER = "127.0.0.2";
const HEADERS_TIMEOUT_MS = 5_000;
const IDLE_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 1_000;
const PER_CLIENT = 500;
const RAW_ATTACKERS = 1_500;
const MAX_STREAMS = 8;

/** grpc.health.v1.Health for grpc-js, on a channel of its own (no connection shared with other clients). */
function healthClient(address: string): grpc.Client {
  const definition = protoLoader.loadSync("grpc/health/v1/health.proto", { includeDirs: [PROTO_ROOT], enums: String, defaults: true });
  const loaded = grpc.loadPackageDefinition(definition) as any;
  return new loaded.grpc.health.v1.Health(address, grpc.credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1 });
}

/**
 * A TCP connection from ATTACKER that sends the first line of the HTTP/2
 * preface and nothing more. `answered`: the server spoke (its SETTINGS), so
 * it accepted the connection; `closedAfterMs`: when the server closed it,
 * after this side saw it connected (the server's timers start later).
 */
async function stalledPreface(port: number) {
  const socket = net.connect({ host: "127.0.0.1", port, localAddress: ATTACKER });
  const state: { answered: boolean; closedAfterMs?: number } = { answered: false };
  socket.on("error", () => {});
  socket.on("data", () => (state.answered = true));
  await once(socket, "connect");
  const connectedAt = Date.now();
  socket.on("close", () => (state.closedAfterMs = Date.now() - connectedAt));
  socket.write("PRI * HTTP/2.0\r\n");
  return { socket, state };
}

describe("the core port under slow and idle connections", () => {
  let service: TestService;
  let port: number;
  let health: grpc.Client;
  let admin: grpc.Client;
  before(async () => {
    service = await startTestService({
      HTTP_HEADERS_TIMEOUT: `${HEADERS_TIMEOUT_MS}ms`,
      HTTP_IDLE_TIMEOUT: `${IDLE_TIMEOUT_MS}ms`,
      HTTP_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`,
      MAX_CONNECTIONS_PER_CLIENT: String(PER_CLIENT),
      GRPC_MAX_CONCURRENT_STREAMS: String(MAX_STREAMS),
    });
    port = Number(new URL(service.grpcUrl).port);
    health = healthClient(grpcAddress(service.grpcUrl));
    admin = new (loadGrpcPackage().AdminService!)(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
  });
  after(async () => {
    health?.close();
    admin?.close();
    await service?.close();
  });

  /** A health Check and a real RPC from 127.0.0.1, each answered within `ms`; their latencies. */
  async function legitimateCallsAnswered(ms: number): Promise<string> {
    let started = Date.now();
    assert.deepEqual(await unary(health, "Check", { service: "" }), { status: "SERVING" });
    const check = Date.now() - started;
    assert.ok(check < ms, `health Check took ${check} ms`);
    started = Date.now();
    const account = await unary(admin, "CreateAccount", { name: "legit", balance: "1.00" }, bearer(ADMIN_TOKEN));
    assert.equal(account.balance.balance, "1.00");
    const create = Date.now() - started;
    assert.ok(create < ms, `CreateAccount took ${create} ms`);
    return `Check ${check} ms, CreateAccount ${create} ms`;
  }

  it("when thousands of connections from one address never finish the preface, then those over its cap close at once, the rest within HTTP_HEADERS_TIMEOUT, and 127.0.0.1 is still served", async () => {
    // Opened in batches, as fast as the listen backlog takes them (a burst beyond it is the kernel's to drop, not ours).
    const attackers: Awaited<ReturnType<typeof stalledPreface>>[] = [];
    while (attackers.length < RAW_ATTACKERS) {
      const batch = Math.min(200, RAW_ATTACKERS - attackers.length);
      attackers.push(...(await Promise.all(Array.from({ length: batch }, () => stalledPreface(port)))));
    }
    try {
      const during = await legitimateCallsAnswered(2_000);
      await eventually(
        async () => attackers.filter((a) => a.state.closedAfterMs === undefined).length,
        (open) => open === 0,
        { timeoutMs: HEADERS_TIMEOUT_MS + 5_000, what: "stalled connections to be closed" },
      );
      // Over MAX_CONNECTIONS_PER_CLIENT: closed at once, without a word. The rest: by the headers timeout.
      const refused = attackers.filter((a) => !a.state.answered);
      const accepted = attackers.filter((a) => a.state.answered);
      assert.equal(accepted.length, PER_CLIENT, "MAX_CONNECTIONS_PER_CLIENT connections are accepted (opening them all took longer than the headers timeout?)");
      const refusedAfter = Math.max(...refused.map((a) => a.state.closedAfterMs!));
      assert.ok(refusedAfter < HEADERS_TIMEOUT_MS / 2, `the connections over the cap were closed within ${refusedAfter} ms`);
      const acceptedAfter = accepted.map((a) => a.state.closedAfterMs!);
      assert.ok(Math.min(...acceptedAfter) >= HEADERS_TIMEOUT_MS - 50, `an accepted one closed after ${Math.min(...acceptedAfter)} ms`);
      assert.ok(Math.max(...acceptedAfter) < HEADERS_TIMEOUT_MS + 3_000, `an accepted one closed after ${Math.max(...acceptedAfter)} ms`);
      await legitimateCallsAnswered(2_000);
      console.log(
        `# edge: ${RAW_ATTACKERS} stalled connections from ${ATTACKER}: ${refused.length} refused within ${refusedAfter} ms, ` +
          `${accepted.length} closed by the headers timeout after ${Math.min(...acceptedAfter)}-${Math.max(...acceptedAfter)} ms; ` +
          `from 127.0.0.1 meanwhile: ${during}`,
      );
    } finally {
      for (const attacker of attackers) attacker.socket.destroy();
    }
  });

  it("when sessions stay idle (or only ping) or trickle a call's message, then idle ones are closed after HTTP_IDLE_TIMEOUT, slow calls get DEADLINE_EXCEEDED after HTTP_REQUEST_TIMEOUT, and a long health Watch is not cut", async () => {
    const watchClient = healthClient(grpcAddress(service.grpcUrl));
    const watch: grpc.ClientReadableStream<{ status: string }> = (watchClient as any).Watch({ service: "" });
    const statuses: string[] = [];
    const watchState: { error?: grpc.ServiceError; ended: boolean } = { ended: false };
    watch.on("data", (message: { status: string }) => statuses.push(message.status));
    watch.on("error", (error: grpc.ServiceError) => (watchState.error = error));
    watch.on("end", () => (watchState.ended = true));
    const idle: { session: http2.ClientHttp2Session; ready: Promise<unknown>; closedAfterMs?: number }[] = [];
    const slow: { session: http2.ClientHttp2Session; trickle?: NodeJS.Timeout; answer: Promise<RawAnswer> }[] = [];
    const pingTimers: NodeJS.Timeout[] = [];
    try {
      await eventually(async () => statuses.length, (n) => n === 1, { timeoutMs: 5_000, what: "the Watch's first status" });
      const started = Date.now();
      for (let i = 0; i < 50; i++) {
        const session = connectH2(service.grpcUrl, ATTACKER);
        const entry: (typeof idle)[number] = { session, ready: once(session, "remoteSettings") };
        session.on("close", () => (entry.closedAfterMs = Date.now() - started));
        idle.push(entry);
      }
      await Promise.all(idle.map((entry) => entry.ready));
      // A fifth of them send a PING every 100 ms: frames without calls do not keep a session open.
      const pingers = idle.slice(0, 10).map(({ session }) => setInterval(() => !session.closed && !session.destroyed && session.ping(() => {}), 100));
      pingTimers.push(...pingers);
      assert.equal(idle[0]!.session.remoteSettings.maxConcurrentStreams, MAX_STREAMS, "GRPC_MAX_CONCURRENT_STREAMS is advertised");

      for (let i = 0; i < 50; i++) {
        const session = connectH2(service.grpcUrl, ATTACKER);
        // A ListModels call (it needs no key) whose message is sent a byte every 100 ms and never finished.
        const message = envelope(Buffer.alloc(64));
        const entry = { session } as (typeof slow)[number];
        let sent = 0;
        entry.answer = rawCall(session, "/generation.v1.GenerationService/ListModels", { "content-type": "application/grpc", te: "trailers" }, [], false, (stream) => {
          entry.trickle = setInterval(() => {
            if (sent < message.byteLength - 1 && !stream.closed) stream.write(message.subarray(sent, ++sent));
          }, 100);
        });
        slow.push(entry);
      }

      await legitimateCallsAnswered(2_000);
      const answers = await Promise.all(slow.map((s) => s.answer));
      for (const answer of answers) {
        const status = grpcStatusOf(answer);
        assert.equal(status.code, grpc.status.DEADLINE_EXCEEDED, JSON.stringify(status));
        assert.equal(status.details[0]?.reason, "request_timeout");
        assert.ok(answer.ms >= REQUEST_TIMEOUT_MS - 50 && answer.ms < REQUEST_TIMEOUT_MS + 3_000, `answered after ${answer.ms} ms`);
      }
      await eventually(async () => idle.filter((s) => s.closedAfterMs === undefined).length, (open) => open === 0, {
        timeoutMs: IDLE_TIMEOUT_MS + 5_000,
        what: "idle sessions to be closed",
      });
      for (const { closedAfterMs } of idle) assert.ok(closedAfterMs! >= IDLE_TIMEOUT_MS - 50, `idle session closed after ${closedAfterMs} ms`);
      await eventually(async () => slow.filter((s) => !s.session.closed && !s.session.destroyed).length, (open) => open === 0, {
        timeoutMs: IDLE_TIMEOUT_MS + 5_000,
        what: "sessions of refused slow calls to be closed once idle",
      });

      // The Watch outlived both timeouts and still hears readiness changes.
      assert.ok(Date.now() - started > IDLE_TIMEOUT_MS + REQUEST_TIMEOUT_MS);
      assert.equal(watchState.error, undefined, `Watch failed: ${watchState.error?.code} ${watchState.error?.details}`);
      assert.equal(watchState.ended, false);
      await legitimateCallsAnswered(2_000);
      service.running.readiness.drain();
      await eventually(async () => [...statuses], (seen) => seen.length === 2, { timeoutMs: 5_000, what: "NOT_SERVING on the long Watch" });
      assert.deepEqual(statuses, ["SERVING", "NOT_SERVING"]);
    } finally {
      watch.cancel();
      watchClient.close();
      for (const timer of pingTimers) clearInterval(timer);
      for (const { session } of idle) session.destroy();
      for (const { session, trickle } of slow) {
        clearInterval(trickle);
        session.destroy();
      }
    }
  });
});

describe("the core port's total connection cap", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ MAX_CONNECTIONS: "5", HTTP_HEADERS_TIMEOUT: "10s" });
  });
  after(() => service?.close());

  it("when MAX_CONNECTIONS are open, then a further connection is closed at once, and accepted again once one closes", async () => {
    const port = Number(new URL(service.grpcUrl).port);
    const held = await Promise.all(Array.from({ length: 5 }, () => stalledPreface(port)));
    try {
      const extra = await stalledPreface(port);
      await eventually(async () => extra.state.closedAfterMs, (ms) => ms !== undefined, { timeoutMs: 2_000, what: "the extra connection to be closed" });
      assert.ok(held.every((h) => h.state.closedAfterMs === undefined), "the five held connections stay open");
      held[0]!.socket.destroy();
      await eventually(async () => held[0]!.state.closedAfterMs, (ms) => ms !== undefined, { what: "a held connection to close" });
      const session = connectH2(service.grpcUrl);
      try {
        const answer = await rawCall(session, "/grpc.health.v1.Health/Check", { "content-type": "application/grpc", te: "trailers" }, [envelope(new Uint8Array())]);
        assert.equal(grpcStatusOf(answer).code, grpc.status.OK);
      } finally {
        session.destroy();
      }
    } finally {
      for (const h of held) h.socket.destroy();
    }
  });
});
