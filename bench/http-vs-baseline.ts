/**
 * Gateway and core throughput/latency against a bare Fastify JSON route, in one
 * run on one machine (issue 2). Run with `npm run bench` (or
 * `npx tsx bench/http-vs-baseline.ts`); about 100 s; results go to BENCHMARKS.md.
 *
 * The servers (the real service on its embedded backends, a copy with its
 * consumers stopped, the bare Fastify baseline and a bare Connect gRPC server)
 * share this process's main thread; the load comes from closed loops in a
 * worker thread (bench/load-generator.ts), so client and server each have an
 * event loop of their own. Scenarios run one after another, each with a
 * warm-up; the POST against the instance whose worker renders PNGs runs last
 * (see main()).
 *
 * Knobs (environment): BENCH_DURATION_S (default 10), BENCH_WARMUP_S (2),
 * BENCH_CONNECTIONS (32), BENCH_OUT (also write the report to this file).
 */
import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { mkdtemp, writeFile } from "node:fs/promises";
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
import { startService } from "../src/runtime/start-service.js";
import type { GrpcScenario, HttpScenario, RunRequest, WorkerMessage } from "./load-generator.js";

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const MAX_REQUESTS_PER_PHASE = 2_000_000;
const WATCHDOG_S = 30 + 11 * (WARMUP_S + DURATION_S) + 60;
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

function benchConfig(dataDir: string, env: Record<string, string> = {}): Config {
  return loadConfig({
    HOST: "127.0.0.1",
    PORT: "0",
    GRPC_PORT: "0",
    ADMIN_TOKEN,
    DATA_DIR: dataDir,
    SIMULATED_LATENCY_MS: "0",
    LOG_LEVEL: "silent",
    DRAIN_DELAY: "0ms",
    ...env,
  });
}

/** The real service exactly as `npm start` composes it: gateway, core on the gRPC port, workers. */
async function startRealService(dataDir: string): Promise<Gateway> {
  const running = await startService(benchConfig(dataDir));
  return { url: running.httpUrl, grpcUrl: running.grpcUrl, close: () => running.close() };
}

/**
 * The same service with its consumers stopped, so accepted jobs stay queued:
 * isolates the accept path from PNG rendering, which otherwise runs on this
 * same event loop. The in-process bus drops events that no group consumes.
 */
async function startServiceWithoutWorkers(dataDir: string, env: Record<string, string> = {}): Promise<Gateway> {
  const running = await startService(benchConfig(dataDir, env));
  await running.core!.stopConsumers(0);
  return { url: running.httpUrl, close: () => running.close() };
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
  /** CPU time of the whole process (both threads, GC helpers, libuv) per wall second; 2.0 is both cores. */
  readonly processCpu: number;
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
  const result = await new Promise<Extract<WorkerMessage, { type: "result" }> & { serverElu: number; processCpu: number }>((resolve, reject) => {
    let eluStart: ReturnType<typeof performance.eventLoopUtilization> | undefined;
    let cpuStart: NodeJS.CpuUsage | undefined;
    let wallStart = 0;
    const onMessage = (message: WorkerMessage) => {
      if (message.type === "measuring") {
        eluStart = performance.eventLoopUtilization();
        cpuStart = process.cpuUsage();
        wallStart = performance.now();
        return;
      }
      const serverElu = eluStart ? performance.eventLoopUtilization(eluStart).utilization : NaN;
      const cpu = process.cpuUsage(cpuStart);
      const processCpu = cpuStart ? (cpu.user + cpu.system) / 1000 / (performance.now() - wallStart) : NaN;
      cleanup();
      resolve({ ...message, serverElu, processCpu });
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
    processCpu: result.processCpu,
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
    "| scenario | req/s | p50 ms | p99 ms | max ms | requests | non-2xx / errors | req/s vs baseline | p50 vs baseline | p99 vs baseline | server loop busy | client loop busy | process CPU (cores) |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    const base = baselineOf.get(r.name);
    const ratio = (a: number, b: number | undefined) => (base && b ? `${fmt(a / b)}×` : "—");
    lines.push(
      `| ${r.name} | ${fmt(r.rps, 0)} | ${fmt(r.p50)} | ${fmt(r.p99)} | ${fmt(r.max, 1)} | ${r.requests} | ${r.errors} | ` +
        `${ratio(r.rps, base?.rps)} | ${ratio(r.p50, base?.p50)} | ${ratio(r.p99, base?.p99)} | ` +
        `${fmt(r.serverElu * 100, 0)}% | ${fmt(r.clientElu * 100, 0)}% | ${fmt(r.processCpu)} |`,
    );
  }
  return lines;
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const loadBefore = os.loadavg();
  const started = performance.now();
  const dataDirs = await Promise.all([0, 1, 2, 3, 4].map(() => mkdtemp(join(os.tmpdir(), "gen-service-bench-"))));
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
    const postNoWorkers = await measure(
      worker, `gateway: POST /api/v1/generations (${MODEL}), no worker running`, httpScenario(noWorkers.url, "POST", "/api/v1/generations", 202, noWorkersKey),
    );
    rows.push(postNoWorkers);
    baselineOf.set(postNoWorkers.name, basePost);
    // The same accept path with the cheaper durability setting, and with nothing durable at all.
    for (const [index, [label, env]] of ([
      ["SQLITE_SYNCHRONOUS=normal", { SQLITE_SYNCHRONOUS: "normal" }],
      ["EMBEDDED_STORE=memory (nothing durable)", { EMBEDDED_STORE: "memory" }],
    ] as const).entries()) {
      const variant = await startServiceWithoutWorkers(dataDirs[3 + index]!, env);
      cleanups.push(() => variant.close());
      const variantKey = await customer(variant);
      const row = await measure(worker, `gateway: POST /api/v1/generations, no worker, ${label}`, httpScenario(variant.url, "POST", "/api/v1/generations", 202, variantKey));
      rows.push(row);
      baselineOf.set(row.name, basePost);
    }

    const baseGet = await measure(worker, "baseline: bare Fastify GET /baseline/:id", httpScenario(baseline.url, "GET", `/baseline/${doneJobId}`, 200));
    rows.push(baseGet);
    const getJob = await measure(worker, "gateway: GET /api/v1/jobs/{id} (done job)", httpScenario(service.url, "GET", `/api/v1/jobs/${doneJobId}`, 200, apiKey));
    rows.push(getJob);
    baselineOf.set(getJob.name, baseGet);

    const grpcBase = await measure(worker, "gRPC baseline: bare Connect server, GetJob (fixed reply)", {
      kind: "grpc", protocol: "grpc", baseUrl: grpcBaseline.url, apiKey, jobId: doneJobId,
    });
    rows.push(grpcBase);
    const grpcCore = await measure(worker, "core: gRPC GenerationService.GetJob on the core port", {
      kind: "grpc", protocol: "grpc", baseUrl: service.grpcUrl!, apiKey, jobId: doneJobId,
    });
    rows.push(grpcCore);
    baselineOf.set(grpcCore.name, baseGet);
    const connectCore = await measure(worker, "core: Connect protocol GetJob on the core port (h2, as a gateway with CORE_URL calls it)", {
      kind: "grpc", protocol: "connect", baseUrl: service.grpcUrl!, apiKey, jobId: doneJobId,
    });
    rows.push(connectCore);
    baselineOf.set(connectCore.name, baseGet);

    // Last, on its own instance: accepting outpaces rendering, so the backlog it leaves would take minutes to
    // render and would disturb any scenario after it. This instance is never closed: a graceful stop would
    // wait for that backlog. The process exits right after the report instead.
    const rendering = await startRealService(dataDirs[2]!);
    const renderingKey = await customer(rendering);
    const before = await balance(rendering, renderingKey);
    const postWorkers = await measure(
      worker, `gateway: POST /api/v1/generations (${MODEL}), worker rendering PNGs in the same process`,
      httpScenario(rendering.url, "POST", "/api/v1/generations", 202, renderingKey),
    );
    const after = await balance(rendering, renderingKey);
    rows.splice(2, 0, postWorkers);
    baselineOf.set(postWorkers.name, basePost);
    const accepted = (before.balance - after.balance + after.reserved) / PRICE_PICO;
    const charged = (before.balance - after.balance) / PRICE_PICO;
    notes.push(
      `POST with the worker running: ${accepted} jobs accepted in ${WARMUP_S + DURATION_S} s (warm-up included), ${charged} of them rendered and charged ` +
        `(${fmt(Number(charged) / (WARMUP_S + DURATION_S), 0)} PNGs/s), ${accepted - charged} still queued or rendering when the load stopped.`,
    );

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
      `Stores: every gateway row runs on the durable default (SQLite in DATA_DIR, SQLITE_SYNCHRONOUS=full: each commit fsynced) unless the row says otherwise.`,
      "",
      `Ratios: gateway POST rows against the bare POST; GET job against the bare GET (job JSON of ${bytes} bytes); the core's gRPC and Connect GetJob against the bare GET as well (the gRPC protocol's own floor in Node is the gRPC baseline row).`,
      ...notes.map((n) => `- ${n}`),
      ...rows.filter((r) => r.errors > 0).map((r) => `- ${r.name}: ${r.errors} errors, statuses ${JSON.stringify(r.statuses)}, e.g. ${r.errorSamples.join("; ")}`),
    ].join("\n");
    console.log(report);
    if (process.env.BENCH_OUT) await writeFile(process.env.BENCH_OUT, report + "\n");
  } finally {
    await worker.terminate();
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    // Synchronous, so the rendering instance gets no turn to write another blob between the removal and the exit.
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  }
}

// Bounded in time whatever happens (a stuck scenario, a server that stops answering).
setTimeout(() => {
  console.error(`bench: gave up after ${WATCHDOG_S} s`);
  process.exit(2);
}, WATCHDOG_S * 1000).unref();

try {
  await main();
  process.exit(0);
} catch (error) {
  console.error(error);
  process.exit(1);
}
