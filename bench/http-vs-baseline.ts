/**
 * Gateway and core throughput/latency against a bare Fastify JSON route, in one
 * run on one machine (issue 2). Run with `npm run bench` (or
 * `npx tsx bench/http-vs-baseline.ts`). The servers run on this process's main
 * thread; the load comes from a worker thread (bench/load-generator.ts).
 *
 * Knobs (environment): BENCH_DURATION_S (default 10), BENCH_WARMUP_S (2),
 * BENCH_CONNECTIONS (32), BENCH_OUT (also write the report to this file).
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import os from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as delay } from "node:timers/promises";
import { Worker } from "node:worker_threads";
import { create } from "@bufbuild/protobuf";
import { createClient, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import Fastify, { type FastifyInstance } from "fastify";
import { GenerationService, GetJobRequestSchema, type GetJobResponse } from "../gen/generation/v1/generation_service_pb.js";
import { loadConfig, type Config } from "../src/config/config.js";
import type { CoreClients } from "../src/runtime/core-clients.js";
import { createCore, embeddedPorts } from "../src/runtime/embedded-core.js";
import { startService } from "../src/runtime/start-service.js";
import { buildGateway } from "../src/transport/http/gateway.js";
import type { GrpcScenario, HttpScenario, RunRequest, WorkerMessage } from "./load-generator.js";

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const MAX_REQUESTS_PER_PHASE = 2_000_000;
const ADMIN_TOKEN = "bench-admin-token";
const MODEL = "aimodel-2.5-flash-image";
const PRICE_PICO = 39_000_000_000n; // 0.039, the fast model's default 1K price
const GENERATION_BODY = JSON.stringify({ model: MODEL, prompt: "a lighthouse at dusk, oil painting" });

// ---------------------------------------------------------------- servers

interface Gateway {
  readonly url: string;
  readonly grpcUrl?: string;
  close(): Promise<void>;
}

function benchConfig(dataDir: string): Config {
  return loadConfig({
    HOST: "127.0.0.1",
    PORT: "0",
    GRPC_PORT: "0",
    ADMIN_TOKEN,
    DATA_DIR: dataDir,
    SIMULATED_LATENCY_MS: "0",
    LOG_LEVEL: "silent",
  });
}

/** The real service exactly as `npm start` composes it: gateway, core on the gRPC port, workers. */
async function startRealService(dataDir: string): Promise<Gateway> {
  const running = await startService(benchConfig(dataDir), () => {});
  return { url: running.httpUrl, grpcUrl: running.grpcUrl, close: () => running.close() };
}

/**
 * The same gateway and core with the generation worker never subscribed, so
 * accepted jobs stay queued: isolates the accept path from PNG rendering, which
 * otherwise runs on this same event loop. Mirrors startService minus startWorkers.
 */
async function startServiceWithoutWorkers(dataDir: string): Promise<Gateway> {
  const config = benchConfig(dataDir);
  let clients: CoreClients | undefined;
  const app = await buildGateway(
    {
      get generation() { return clients!.generation; },
      get text() { return clients!.text; },
      get admin() { return clients!.admin; },
      get files() { return clients!.files; },
    },
    { logLevel: "silent" },
  );
  await app.listen({ host: "127.0.0.1", port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const core = createCore(config, embeddedPorts(config, () => {}), url);
  clients = core.clients;
  return { url, close: async () => { await app.close(); await core.close(); } };
}

/** A bare Fastify app: JSON in, JSON out, nothing else. The floor any Node HTTP route pays. */
async function startBaseline(jobBody: Record<string, unknown>): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify({ logger: false, forceCloseConnections: true });
  app.post("/baseline", async (request, reply) => {
    const id = crypto.randomUUID();
    void (request.body as { model?: string }).model;
    reply.header("location", `/api/v1/jobs/${id}`);
    return reply.code(202).send({ job_id: id, status: "queued", status_url: `/api/v1/jobs/${id}` });
  });
  app.get<{ Params: { id: string } }>("/baseline/:id", async (request, reply) => {
    reply.header("cache-control", "no-store");
    return { ...jobBody, job_id: request.params.id };
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

/** A bare Connect server on h2c answering GetJob with a fixed message: the floor of a gRPC unary call here. */
async function startGrpcBaseline(fixed: GetJobResponse): Promise<{ url: string; close(): Promise<void> }> {
  const impl: Partial<ServiceImpl<typeof GenerationService>> = {
    getJob: (request) => ({ ...fixed, job: fixed.job && { ...fixed.job, jobId: request.jobId } }),
  };
  const server = http2.createServer(connectNodeAdapter({ routes: (router) => router.service(GenerationService, impl) }));
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => { sessions.add(s); s.on("close", () => sessions.delete(s)); });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => { server.close(() => resolve()); for (const s of sessions) s.close(); }),
  };
}

// ---------------------------------------------------------------- setup helpers

async function json(url: string, init: RequestInit & { expect: number }): Promise<any> {
  const response = await fetch(url, init);
  const text = await response.text();
  if (response.status !== init.expect) throw new Error(`${init.method ?? "GET"} ${url} answered ${response.status}: ${text}`);
  return text ? JSON.parse(text) : undefined;
}

async function customer(gateway: Gateway): Promise<string> {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" };
  const account = await json(`${gateway.url}/admin/v1/accounts`, {
    method: "POST", headers: admin, body: JSON.stringify({ name: "bench", balance: "1000000" }), expect: 201,
  });
  const key = await json(`${gateway.url}/admin/v1/accounts/${account.account_id}/keys`, {
    method: "POST", headers: admin, body: JSON.stringify({ models: ["*"] }), expect: 201,
  });
  return key.api_key as string;
}

async function createJob(gateway: Gateway, apiKey: string): Promise<string> {
  const accepted = await json(`${gateway.url}/api/v1/generations`, {
    method: "POST", headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }, body: GENERATION_BODY, expect: 202,
  });
  return accepted.job_id as string;
}

/** Polls (with a deadline) until the job is terminal; returns its JSON. */
async function finished(gateway: Gateway, apiKey: string, jobId: string, timeoutMs: number): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await json(`${gateway.url}/api/v1/jobs/${jobId}`, { headers: { authorization: `Bearer ${apiKey}` }, expect: 200 });
    if (job.status === "done" || job.status === "failed") return job;
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${job.status} after ${timeoutMs} ms`);
    await delay(50);
  }
}

function pico(amount: string): bigint {
  const [whole, fraction = ""] = amount.split(".");
  return BigInt(whole!) * 10n ** 12n + BigInt(fraction.padEnd(12, "0"));
}

async function balance(gateway: Gateway, apiKey: string): Promise<{ balance: bigint; reserved: bigint }> {
  const b = await json(`${gateway.url}/api/v1/balance`, { headers: { authorization: `Bearer ${apiKey}` }, expect: 200 });
  return { balance: pico(b.balance), reserved: pico(b.reserved) };
}

// ---------------------------------------------------------------- measuring

interface Measured {
  readonly name: string;
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly requests: number;
  readonly errors: number;
  readonly statuses: Record<string, number>;
  readonly serverElu: number;
  readonly clientElu: number;
  readonly errorSamples: string[];
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

function startLoadWorker(): Worker {
  // tsx's loader does not follow into worker threads, so the worker registers it before importing the TypeScript module.
  const tsx = import.meta.resolve("tsx/esm/api");
  const target = new URL("./load-generator.ts", import.meta.url).href;
  const code = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(target)}); });`;
  return new Worker(code, { eval: true });
}

async function measure(worker: Worker, name: string, scenario: HttpScenario | GrpcScenario): Promise<Measured> {
  const request: RunRequest = {
    scenario, connections: CONNECTIONS, warmupMs: WARMUP_S * 1000, durationMs: DURATION_S * 1000, maxRequests: MAX_REQUESTS_PER_PHASE,
  };
  process.stderr.write(`· ${name} … `);
  const result = await new Promise<Extract<WorkerMessage, { type: "result" }> & { serverElu: number }>((resolve, reject) => {
    let eluStart: ReturnType<typeof performance.eventLoopUtilization> | undefined;
    const onMessage = (message: WorkerMessage) => {
      if (message.type === "measuring") {
        eluStart = performance.eventLoopUtilization();
        return;
      }
      const serverElu = eluStart ? performance.eventLoopUtilization(eluStart).utilization : NaN;
      cleanup();
      resolve({ ...message, serverElu });
    };
    const onError = (error: Error) => { cleanup(); reject(error); };
    const cleanup = () => { worker.off("message", onMessage); worker.off("error", onError); };
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.postMessage(request);
  });
  const sorted = result.latenciesMs.sort();
  const measured: Measured = {
    name,
    rps: (result.requests / result.elapsedMs) * 1000,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
    requests: result.requests,
    errors: result.errors,
    statuses: result.statuses,
    serverElu: result.serverElu,
    clientElu: result.clientElu,
    errorSamples: result.errorSamples,
  };
  process.stderr.write(`${measured.rps.toFixed(0)} req/s, p50 ${measured.p50.toFixed(2)} ms, p99 ${measured.p99.toFixed(2)} ms, errors ${measured.errors}\n`);
  return measured;
}

function httpScenario(base: string, method: "GET" | "POST", path: string, expectStatus: number, apiKey?: string): HttpScenario {
  const url = new URL(base);
  const headers: Record<string, string> = {};
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  if (method === "POST") headers["content-type"] = "application/json";
  return {
    kind: "http", host: url.hostname, port: Number(url.port), method, path, headers, expectStatus,
    ...(method === "POST" ? { body: GENERATION_BODY } : {}),
  };
}

// ---------------------------------------------------------------- report

function sh(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { encoding: "utf8" }).trim();
  } catch {
    return "(unavailable)";
  }
}

function machine(): string[] {
  const model = sh("lscpu", []).split("\n").find((l) => l.startsWith("Model name"))?.replace(/^Model name:\s*/, "") ?? os.cpus()[0]?.model;
  const memory = sh("free", ["-h"]).split("\n").find((l) => l.startsWith("Mem:"))?.split(/\s+/)[1] ?? `${(os.totalmem() / 2 ** 30).toFixed(1)}Gi`;
  const osName = sh("sh", ["-c", ". /etc/os-release && echo \"$PRETTY_NAME\""]);
  return [
    `- CPU: ${model}, ${sh("nproc", [])} cores (nproc)`,
    `- Memory: ${memory} (free -h)`,
    `- OS: ${osName}, kernel ${os.release()}`,
    `- Node: ${process.version}`,
  ];
}

const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : "–");

function table(rows: Measured[], baselineOf: Map<string, Measured>): string[] {
  const lines = [
    "| scenario | req/s | p50 ms | p99 ms | max ms | requests | non-2xx / errors | req/s vs baseline | p50 vs baseline | p99 vs baseline | server loop busy | client loop busy |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    const base = baselineOf.get(r.name);
    const ratio = (a: number, b: number | undefined) => (base && b ? `${fmt(a / b)}×` : "—");
    lines.push(
      `| ${r.name} | ${fmt(r.rps, 0)} | ${fmt(r.p50)} | ${fmt(r.p99)} | ${fmt(r.max, 1)} | ${r.requests} | ${r.errors} | ` +
        `${ratio(r.rps, base?.rps)} | ${ratio(r.p50, base?.p50)} | ${ratio(r.p99, base?.p99)} | ` +
        `${fmt(r.serverElu * 100, 0)}% | ${fmt(r.clientElu * 100, 0)}% |`,
    );
  }
  return lines;
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const loadBefore = os.loadavg();
  const started = performance.now();
  const dataDirs = await Promise.all([0, 1].map(() => mkdtemp(join(os.tmpdir(), "gen-service-bench-"))));
  const service = await startRealService(dataDirs[0]!);
  const noWorkers = await startServiceWithoutWorkers(dataDirs[1]!);
  const cleanups: (() => Promise<unknown>)[] = [() => service.close(), () => noWorkers.close()];
  const worker = startLoadWorker();
  try {
    const apiKey = await customer(service);
    const noWorkersKey = await customer(noWorkers);

    const doneJobId = await createJob(service, apiKey);
    const doneJob = await finished(service, apiKey, doneJobId, 30_000);
    if (doneJob.status !== "done") throw new Error(`setup job ended ${doneJob.status}`);
    const baseline = await startBaseline(doneJob);
    cleanups.push(() => baseline.app.close());

    // The gRPC baseline answers the very message the core returns for this job, so both carry the same bytes.
    const probe = createClient(GenerationService, createGrpcTransport({ baseUrl: service.grpcUrl! }));
    const realGetJob = await probe.getJob(create(GetJobRequestSchema, { jobId: doneJobId }), { headers: { authorization: `Bearer ${apiKey}` } });
    const grpcBaseline = await startGrpcBaseline(realGetJob);
    cleanups.push(() => grpcBaseline.close());

    const rows: Measured[] = [];
    const baselineOf = new Map<string, Measured>();
    const notes: string[] = [];

    const basePost = await measure(worker, "baseline: bare Fastify POST /baseline", httpScenario(baseline.url, "POST", "/baseline", 202));
    rows.push(basePost);

    const before = await balance(service, apiKey);
    const postWorkers = await measure(
      worker, `gateway: POST /api/v1/generations (${MODEL}), worker rendering in-process`, httpScenario(service.url, "POST", "/api/v1/generations", 202, apiKey),
    );
    // Jobs accepted during warm-up and measurement are rendered on this same event loop; wait for them so they do not bleed into later scenarios.
    const drainStart = performance.now();
    const sentinel = await createJob(service, apiKey);
    await finished(service, apiKey, sentinel, 120_000);
    const drainMs = performance.now() - drainStart;
    const after = await balance(service, apiKey);
    const rendered = (before.balance - after.balance) / PRICE_PICO - 1n;
    rows.push(postWorkers);
    baselineOf.set(postWorkers.name, basePost);
    notes.push(
      `POST with workers: ${rendered} jobs (warm-up + measured) were rendered and charged; ${fmt(drainMs / 1000, 1)} s after the load stopped the last one was done (reserved left: ${after.reserved}).`,
    );

    const postNoWorkers = await measure(
      worker, `gateway: POST /api/v1/generations (${MODEL}), no worker subscribed`, httpScenario(noWorkers.url, "POST", "/api/v1/generations", 202, noWorkersKey),
    );
    rows.push(postNoWorkers);
    baselineOf.set(postNoWorkers.name, basePost);

    const baseGet = await measure(worker, "baseline: bare Fastify GET /baseline/:id", httpScenario(baseline.url, "GET", `/baseline/${doneJobId}`, 200));
    rows.push(baseGet);
    const getJob = await measure(worker, "gateway: GET /api/v1/jobs/{id} (done job)", httpScenario(service.url, "GET", `/api/v1/jobs/${doneJobId}`, 200, apiKey));
    rows.push(getJob);
    baselineOf.set(getJob.name, baseGet);

    const grpcBase = await measure(worker, "gRPC baseline: bare Connect server, GetJob (fixed reply)", {
      kind: "grpc", baseUrl: grpcBaseline.url, apiKey, jobId: doneJobId,
    });
    rows.push(grpcBase);
    const grpcCore = await measure(worker, "core: gRPC GenerationService.GetJob on the core port", {
      kind: "grpc", baseUrl: service.grpcUrl!, apiKey, jobId: doneJobId,
    });
    rows.push(grpcCore);
    baselineOf.set(grpcCore.name, baseGet);

    const bytes = Buffer.byteLength(JSON.stringify(doneJob));
    const report = [
      "## Run",
      "",
      `Command: \`npm run bench\` (= \`npx tsx bench/http-vs-baseline.ts\`); ${CONNECTIONS} concurrent connections (gRPC: ${CONNECTIONS} in-flight calls on one HTTP/2 session), ${WARMUP_S} s warm-up + ${DURATION_S} s measured per scenario, closed loop.`,
      "",
      ...machine(),
      `- Load average (1/5/15 min) at start: ${loadBefore.map((n) => n.toFixed(2)).join(" / ")}; at end: ${os.loadavg().map((n) => n.toFixed(2)).join(" / ")}`,
      `- Total wall time: ${fmt((performance.now() - started) / 1000, 0)} s`,
      "",
      ...table(rows, baselineOf),
      "",
      `Ratios: gateway POST rows against the bare POST; GET job against the bare GET (job JSON of ${bytes} bytes); the core's gRPC GetJob against the bare GET as well (its own protocol floor is the gRPC baseline row).`,
      ...notes.map((n) => `- ${n}`),
      ...rows.filter((r) => r.errors > 0).map((r) => `- ${r.name}: ${r.errors} errors, statuses ${JSON.stringify(r.statuses)}, e.g. ${r.errorSamples.join("; ")}`),
    ].join("\n");
    console.log(report);
    if (process.env.BENCH_OUT) await writeFile(process.env.BENCH_OUT, report + "\n");
  } finally {
    await worker.terminate();
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    await Promise.all(dataDirs.map((d) => rm(d, { recursive: true, force: true })));
  }
}

await main();
