/**
 * The servers `bench/overhead.ts` measures, each run as a process of its own
 * (`tsx bench/servers.ts <kind>`), so that no two of them, and no load
 * generator, share an event loop. Each prints one JSON line on stdout when it
 * listens ({"ready":true, ...urls}) and stops on SIGTERM.
 *
 *   service      the real service (loadConfig over this process's environment, startService, the
 *                durable default unless the environment says otherwise). With BENCH_NO_WORKERS=1 its
 *                consumers are stopped once ready, so accepted jobs stay queued: the accept path alone.
 *   bare-http    a bare Fastify app: POST /baseline answers the same 202 body and Location as the
 *                service; GET /baseline/:id answers BENCH_JOB_JSON (the real job's JSON) with the id.
 *   floor-get    the floor of answering a job over durable state: a bare Fastify GET /floor/:id that does what any
 *                such answer needs and nothing else: the bearer key looked up (a Map of the keys seen, as the
 *                service caches them), the job's row read from SQLite by id and its owner compared, and the row's
 *                stored JSON (BENCH_JOB_JSON with the id) answered as it is. No schema serializer, core call, metrics
 *                or logs. BENCH_API_KEY is the one key it knows.
 *   bare-grpc    a plain @grpc/grpc-js server answering GenerationService.GetJob with BENCH_JOB_MESSAGE
 *                (the real GetJobResponse, base64 binary) under the requested id. No auth, no lookup.
 *   bare-connect the same on a bare connect-node h2c server: the floor of Connect's own gRPC.
 *   floor-http   the durable floor of an accept: a bare Fastify POST /floor that does the writes an accepted
 *                job needs and nothing else, in ONE SQLite transaction (the balance's reservation, a hold, the
 *                job, its announcement) in WAL mode, made durable by the service's own group commit
 *                (walBarrier) before the 202 leaves. No auth, validation, pricing, idempotency, metrics or logs.
 *   bare-proxy   the floor of a gateway in front of the upstream: a bare Fastify POST route that parses the
 *                JSON body, sends it on (JSON.stringify) to BENCH_UPSTREAM_URL through a keep-alive node:http
 *                Agent, and writes the upstream's SSE bytes back as they come. No auth, money, validation,
 *                re-encoding, metrics or logs.
 *   floor-proxy  bare-proxy plus the money a stream's contract needs: one SQLite transaction (WAL, synchronous
 *                NORMAL, as the service's commits) holding money before the upstream is called, and one settling
 *                it when the answer ends.
 *   upstream     a minimal vendor upstream: POST /v1beta/models/{model}:streamGenerateContent?alt=sse
 *                answers BENCH_UPSTREAM_EVENTS (8) SSE events BENCH_UPSTREAM_GAP_MS (25) apart (a model's token stream), and
 *                :generateContent the whole answer, in the vendor's wire format. BENCH_UPSTREAM_FIRST_MS (0): the wait
 *                before a stream's first event; BENCH_UPSTREAM_ANSWER_MS (the same): before a generateContent answer.
 *                Without alt=sse a stream is the vendor's JSON array, one element a line. BENCH_UPSTREAM_KEY: if set, the key (x-vendor-api-key,
 *                x-goog-api-key or ?key=) must be it, else 401. GET /bench/stats: the requests answered, by kind and by
 *                where the key came, so a bench can check that a gateway in front really called this upstream.
 */
import http2 from "node:http2";
import { Agent, createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import Fastify from "fastify";
import {
  GenerationService, GetJobRequestSchema, GetJobResponseSchema, type GetJobResponse,
} from "../gen/generation/v1/generation_service_pb.js";
import { loadConfig } from "../src/config/config.js";
import { startService } from "../src/runtime/start-service.js";
import { walBarrier } from "../src/adapters/sqlite/wal-barrier.js";
import { FALLBACK_AUTOCHECKPOINT_PAGES, startWalCheckpointer } from "../src/adapters/sqlite/wal-checkpointer.js";

const kind = process.argv[2];

function ready(urls: Record<string, string | undefined>): void {
  process.stdout.write(`${JSON.stringify({ ready: true, pid: process.pid, ...urls })}\n`);
}

function onStop(stop: () => Promise<unknown>): void {
  let stopping = false;
  const handler = () => {
    if (stopping) return;
    stopping = true;
    stop().finally(() => process.exit(0));
  };
  process.on("SIGTERM", handler);
  process.on("SIGINT", handler);
}

function fixedJob(): GetJobResponse {
  const encoded = process.env.BENCH_JOB_MESSAGE;
  if (!encoded) throw new Error("BENCH_JOB_MESSAGE (a base64 GetJobResponse) is required");
  return fromBinary(GetJobResponseSchema, Buffer.from(encoded, "base64"));
}

async function service(): Promise<void> {
  const running = await startService(loadConfig(process.env));
  if (process.env.BENCH_NO_WORKERS === "1") await running.core!.stopConsumers(0);
  onStop(() => running.close({ drain: false }));
  ready({ url: running.httpUrl, grpcUrl: running.grpcUrl });
}

async function bareHttp(): Promise<void> {
  const job = JSON.parse(process.env.BENCH_JOB_JSON ?? "{}") as Record<string, unknown>;
  const app = Fastify({ logger: false, forceCloseConnections: true });
  app.post("/baseline", async (request, reply) => {
    const id = crypto.randomUUID();
    void (request.body as { model?: string }).model;
    reply.header("location", `/api/v1/jobs/${id}`);
    return reply.code(202).send({ job_id: id, status: "queued", status_url: `/api/v1/jobs/${id}` });
  });
  app.get<{ Params: { id: string } }>("/baseline/:id", async (request, reply) => {
    reply.header("cache-control", "no-store");
    return { ...job, job_id: request.params.id };
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  onStop(() => app.close());
  ready({ url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` });
}

async function floorHttp(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bench-floor-"));
  const path = join(dir, "floor.db");
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.exec(`
    CREATE TABLE accounts (account_id TEXT PRIMARY KEY, balance INTEGER NOT NULL, reserved INTEGER NOT NULL);
    CREATE TABLE holds (reservation_id TEXT PRIMARY KEY, account_id TEXT NOT NULL, amount INTEGER NOT NULL, created_at INTEGER NOT NULL);
    CREATE TABLE jobs (job_id TEXT PRIMARY KEY, account_id TEXT NOT NULL, status TEXT NOT NULL, body TEXT NOT NULL, created_at INTEGER NOT NULL);
    CREATE INDEX jobs_by_account ON jobs (account_id, created_at, job_id);
    CREATE TABLE events (event_id INTEGER PRIMARY KEY AUTOINCREMENT, event_key TEXT NOT NULL, payload TEXT NOT NULL, due_at INTEGER NOT NULL);
    CREATE INDEX events_by_due ON events (due_at);
    INSERT INTO accounts VALUES ('floor', 9000000000000000000, 0);
  `);
  const reserve = db.prepare("UPDATE accounts SET reserved = reserved + ? WHERE account_id = ? AND balance - reserved >= ?");
  const hold = db.prepare("INSERT INTO holds VALUES (?, ?, ?, ?)");
  const job = db.prepare("INSERT INTO jobs VALUES (?, ?, 'queued', ?, ?)");
  const event = db.prepare("INSERT INTO events (event_key, payload, due_at) VALUES (?, ?, ?)");
  const PRICE = 39_000_000_000;
  const accept = db.transaction((id: string, body: string, now: number) => {
    if (reserve.run(PRICE, "floor", PRICE).changes !== 1) throw new Error("insufficient funds");
    hold.run(`job:${id}`, "floor", PRICE, now);
    job.run(id, "floor", body, now);
    event.run(id, JSON.stringify({ jobId: id }), now);
  });
  const barrier = walBarrier(path);
  const app = Fastify({ logger: false, forceCloseConnections: true });
  app.post("/floor", async (request, reply) => {
    const id = crypto.randomUUID();
    accept.immediate(id, JSON.stringify(request.body), Date.now());
    await barrier.flush();
    reply.header("location", `/api/v1/jobs/${id}`);
    return reply.code(202).send({ job_id: id, status: "queued", status_url: `/api/v1/jobs/${id}` });
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  onStop(async () => {
    await app.close();
    await barrier.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  ready({ url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` });
}

async function floorGet(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bench-floor-get-"));
  const db = new Database(join(dir, "floor.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.exec("CREATE TABLE jobs (job_id TEXT PRIMARY KEY, account_id TEXT NOT NULL, body TEXT NOT NULL)");
  const job = JSON.parse(process.env.BENCH_JOB_JSON ?? "{}") as { job_id: string };
  db.prepare("INSERT INTO jobs VALUES (?, 'floor', ?)").run(job.job_id, JSON.stringify(job));
  const read = db.prepare<[string], { account_id: string; body: string }>("SELECT account_id, body FROM jobs WHERE job_id = ?");
  const keys = new Map([[process.env.BENCH_API_KEY ?? "", "floor"]]);
  const app = Fastify({ logger: false, forceCloseConnections: true });
  app.get<{ Params: { id: string } }>("/floor/:id", async (request, reply) => {
    const account = keys.get(/^Bearer (\S+)$/.exec(request.headers.authorization ?? "")?.[1] ?? "");
    if (!account) return reply.code(401).send({ error: { code: "invalid_api_key" } });
    const row = read.get(request.params.id);
    if (!row || row.account_id !== account) return reply.code(404).send({ error: { code: "job_not_found" } });
    reply.header("cache-control", "no-store").type("application/json");
    return row.body;
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  onStop(async () => {
    await app.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  ready({ url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` });
}

async function bareGrpc(): Promise<void> {
  const fixed = fixedJob();
  const server = new grpc.Server();
  const getJob = GenerationService.method.getJob;
  server.addService(
    {
      getJob: {
        path: `/${GenerationService.typeName}/${getJob.name}`,
        requestStream: false,
        responseStream: false,
        requestSerialize: (m: unknown) => Buffer.from(toBinary(GetJobRequestSchema, m as never)),
        requestDeserialize: (b: Buffer) => fromBinary(GetJobRequestSchema, b),
        responseSerialize: (m: unknown) => Buffer.from(toBinary(GetJobResponseSchema, m as never)),
        responseDeserialize: (b: Buffer) => fromBinary(GetJobResponseSchema, b),
      },
    },
    {
      getJob: (call: grpc.ServerUnaryCall<{ jobId: string }, GetJobResponse>, callback: grpc.sendUnaryData<GetJobResponse>) => {
        callback(null, { ...fixed, job: fixed.job && { ...fixed.job, jobId: call.request.jobId } });
      },
    },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  onStop(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())));
  ready({ grpcUrl: `http://127.0.0.1:${port}` });
}

async function bareConnect(): Promise<void> {
  const fixed = fixedJob();
  const impl: Partial<ServiceImpl<typeof GenerationService>> = {
    getJob: (request) => ({ ...fixed, job: fixed.job && { ...fixed.job, jobId: request.jobId } }),
  };
  const server = http2.createServer(connectNodeAdapter({ routes: (router) => router.service(GenerationService, impl) }));
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => { sessions.add(s); s.on("close", () => sessions.delete(s)); });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onStop(() => new Promise<void>((resolve) => { server.close(() => resolve()); for (const s of sessions) s.close(); }));
  ready({ grpcUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

/** The money of floor-proxy: one account, a hold per stream taken in one transaction and settled in one. */
function floorLedger(): { hold(id: string): void; settle(id: string, charge: number): void; close(): Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), "bench-floor-proxy-"));
  const path = join(dir, "floor.db");
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  // Checkpoints off the event loop, as the service's store does.
  db.pragma(`wal_autocheckpoint = ${FALLBACK_AUTOCHECKPOINT_PAGES}`);
  const checkpointer = startWalCheckpointer({ path, synchronous: "normal" });
  db.exec(`
    CREATE TABLE accounts (account_id TEXT PRIMARY KEY, balance INTEGER NOT NULL, reserved INTEGER NOT NULL);
    CREATE TABLE holds (reservation_id TEXT PRIMARY KEY, account_id TEXT NOT NULL, amount INTEGER NOT NULL, created_at INTEGER NOT NULL);
    CREATE TABLE charges (reservation_id TEXT PRIMARY KEY, account_id TEXT NOT NULL, amount INTEGER NOT NULL, at INTEGER NOT NULL);
    INSERT INTO accounts VALUES ('floor', 9000000000000000000, 0);
  `);
  const HOLD = 1_000_000;
  const reserve = db.prepare("UPDATE accounts SET reserved = reserved + ? WHERE account_id = ? AND balance - reserved >= ?");
  const insertHold = db.prepare("INSERT INTO holds VALUES (?, 'floor', ?, ?)");
  const deleteHold = db.prepare("DELETE FROM holds WHERE reservation_id = ?");
  const charge = db.prepare("UPDATE accounts SET reserved = reserved - ?, balance = balance - ? WHERE account_id = 'floor'");
  const insertCharge = db.prepare("INSERT INTO charges VALUES (?, 'floor', ?, ?)");
  const hold = db.transaction((id: string) => {
    if (reserve.run(HOLD, "floor", HOLD).changes !== 1) throw new Error("insufficient funds");
    insertHold.run(id, HOLD, Date.now());
  });
  const settle = db.transaction((id: string, amount: number) => {
    deleteHold.run(id);
    charge.run(HOLD, amount);
    insertCharge.run(id, amount, Date.now());
  });
  return {
    hold: (id) => hold.immediate(id),
    settle: (id, amount) => settle.immediate(id, amount),
    close: async () => {
      await checkpointer.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** bare-proxy, and floor-proxy (withMoney): a hold before the upstream is called, settled when its answer ends. */
async function proxy(withMoney: boolean): Promise<void> {
  const upstreamUrl = process.env.BENCH_UPSTREAM_URL;
  if (!upstreamUrl) throw new Error("BENCH_UPSTREAM_URL is required");
  const ledger = withMoney ? floorLedger() : undefined;
  const agent = new Agent({ keepAlive: true, scheduling: "lifo" });
  const app = Fastify({ logger: false, forceCloseConnections: true });
  app.post<{ Params: { model: string } }>("/v1beta/models/:model", (request, reply) => {
    const id = crypto.randomUUID();
    ledger?.hold(id);
    const payload = JSON.stringify(request.body);
    const upstream = httpRequest(`${upstreamUrl}/v1beta/models/${request.params.model}?alt=sse`, {
      method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
    }, (answer) => {
      reply.hijack();
      reply.raw.writeHead(answer.statusCode ?? 502, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      answer.on("data", (chunk: Buffer) => reply.raw.write(chunk));
      answer.on("end", () => {
        ledger?.settle(id, 1_000);
        reply.raw.end();
      });
    });
    upstream.on("error", (error) => reply.code(502).send({ error: error.message }));
    upstream.end(payload);
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  onStop(async () => {
    await app.close();
    await ledger?.close();
  });
  ready({ url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` });
}

/** The vendor's streamed text answer: `events` chunks, cumulative usage, the last with finishReason STOP. */
function vendorChunks(events: number): string[] {
  const chunks: string[] = [];
  for (let i = 0; i < events; i++) {
    const last = i === events - 1;
    chunks.push(JSON.stringify({
      candidates: [{ content: { role: "model", parts: [{ text: `word${i} ` }] }, index: 0, ...(last ? { finishReason: "STOP" } : {}) }],
      usageMetadata: { promptTokenCount: 8, candidatesTokenCount: i + 1, totalTokenCount: 9 + i },
      modelVersion: "bench",
      responseId: "bench-response",
    }));
  }
  return chunks;
}

async function upstream(): Promise<void> {
  const events = Number(process.env.BENCH_UPSTREAM_EVENTS ?? 8);
  const gapMs = Number(process.env.BENCH_UPSTREAM_GAP_MS ?? 25);
  const firstMs = Number(process.env.BENCH_UPSTREAM_FIRST_MS ?? 0);
  const answerMs = Number(process.env.BENCH_UPSTREAM_ANSWER_MS ?? firstMs);
  const key = process.env.BENCH_UPSTREAM_KEY;
  const chunks = vendorChunks(events);
  const whole = JSON.stringify({
    candidates: [{ content: { role: "model", parts: [{ text: chunks.map((_, i) => `word${i} `).join("") }] }, index: 0, finishReason: "STOP" }],
    usageMetadata: { promptTokenCount: 8, candidatesTokenCount: events, totalTokenCount: 8 + events },
    modelVersion: "bench",
    responseId: "bench-response",
  });
  const stats: Record<string, number> = {};
  const count = (name: string) => (stats[name] = (stats[name] ?? 0) + 1);
  /** Where the request's key came, if it is the expected one (any key when none is expected); undefined if refused. */
  const keyCarrier = (request: IncomingMessage, url: URL): string | undefined => {
    const carriers: [string, string | undefined][] = [
      ["x-vendor-api-key", request.headers["x-vendor-api-key"] as string | undefined],
      ["x-goog-api-key", request.headers["x-goog-api-key"] as string | undefined],
      ["?key=", url.searchParams.get("key") ?? undefined],
    ];
    const found = carriers.find(([, value]) => value !== undefined);
    if (key === undefined) return found?.[0] ?? "none";
    return found && found[1] === key ? found[0] : undefined;
  };
  const server = createServer({ keepAliveTimeout: 60_000 }, (request: IncomingMessage, response: ServerResponse) => {
    request.resume();
    request.on("end", async () => {
      const url = new URL(request.url ?? "/", "http://upstream");
      if (request.method === "GET" && url.pathname === "/bench/stats") {
        response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(stats));
        return;
      }
      if (request.method !== "POST" || !url.pathname.startsWith("/v1beta/models/")) {
        count("not found");
        response.writeHead(404, { "content-type": "application/json" }).end('{"error":{"code":404,"message":"not found","status":"NOT_FOUND"}}');
        return;
      }
      const carrier = keyCarrier(request, url);
      if (carrier === undefined) {
        count("unauthorized");
        response.writeHead(401, { "content-type": "application/json" }).end('{"error":{"code":401,"message":"API key not valid","status":"UNAUTHENTICATED"}}');
        return;
      }
      count(`key in ${carrier}`);
      if (url.pathname.includes(":streamGenerateContent")) {
        if (firstMs > 0) await sleep(firstMs);
        const sse = url.searchParams.get("alt") === "sse";
        count(sse ? "streamGenerateContent?alt=sse" : "streamGenerateContent (JSON array)");
        response.writeHead(200, { "content-type": sse ? "text/event-stream" : "application/json" });
        for (let i = 0; i < chunks.length; i++) {
          if (i > 0 && gapMs > 0) await sleep(gapMs);
          const last = i === chunks.length - 1;
          response.write(sse ? `data: ${chunks[i]}\r\n\r\n` : `${i === 0 ? "[" : ""}${chunks[i]}${last ? "\n]" : ",\r\n"}`);
        }
        response.end();
        return;
      }
      count("generateContent");
      if (answerMs > 0) await sleep(answerMs);
      response.writeHead(200, { "content-type": "application/json" }).end(whole);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onStop(() => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections(); }));
  ready({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

const kinds: Record<string, () => Promise<void>> = {
  service, "bare-http": bareHttp, "floor-http": floorHttp, "floor-get": floorGet, "bare-grpc": bareGrpc, "bare-connect": bareConnect, "bare-proxy": () => proxy(false), "floor-proxy": () => proxy(true), upstream,
};
const run = kind ? kinds[kind] : undefined;
if (!run) {
  console.error(`usage: tsx bench/servers.ts ${Object.keys(kinds).join("|")}`);
  process.exit(2);
}
await run();
