/**
 * What the gateway and the core add over bare servers, in one run on one
 * machine: floors that explain a figure, not targets (the comparison that
 * sets targets is `npm run bench:peers`, issue 35). `npm run bench`; about 6 minutes. Every server is a
 * process of its own (bench/servers.ts), and so is every load generator:
 * autocannon for HTTP, ghz for gRPC, bench/stream-client.ts for SSE streams.
 *
 *   REST     GET /api/v1/jobs/{id} and POST /api/v1/generations (no worker; and worker on) on the durable
 *            default, against a bare Fastify app answering the same JSON and the same 202.
 *   gRPC     GenerationService.GetJob on the core port, against a plain @grpc/grpc-js server answering
 *            the same message, and a bare connect-node server (Connect's own gRPC floor); the core's
 *            Connect protocol too.
 *   streams  streamGenerateContent?alt=sse through the gateway against the same upstream called
 *            directly: time to first event and to the stream's end, 1 and 64 streams in flight; and the
 *            floors: a bare Fastify proxy, and the same with a SQLite hold and settlement per stream.
 *   memory   the service's idle RSS, and its RSS after 100k accepted jobs.
 *   render   image jobs completed per second by the simulator with SIMULATED_RENDER_THREADS 1 and 2.
 *
 * Knobs (environment): BENCH_DURATION_S (10), BENCH_WARMUP_S (2), BENCH_CONNECTIONS (32),
 * BENCH_JOBS (100000: jobs accepted before the second RSS reading), BENCH_RENDER_JOBS (400),
 * BENCH_ONLY (comma list of sections: rest,grpc,streams,memory,render), BENCH_PROFILE (a directory:
 * every server process, the service's and the floors', runs with --cpu-prof and writes its profiles into a
 * folder named after it, one per thread: the largest is the main thread's), BENCH_PROFILE_INTERVAL_US (their sampling interval, 1000),
 * BENCH_SERVICE_FLAGS (node flags for the service processes, space-separated, e.g. a V8 heap flag to try; by default
 * those of `npm start`),
 * BENCH_OUT (also write the report to this file).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { GenerationService, GetJobRequestSchema, GetJobResponseSchema } from "../gen/generation/v1/generation_service_pb.js";
import { measuredCommit, runBench, sh } from "./child-processes.js";
import type { StreamResult, StreamRun } from "./stream-client.js";

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const JOBS = Number(process.env.BENCH_JOBS ?? 100_000);
const RENDER_JOBS = Number(process.env.BENCH_RENDER_JOBS ?? 400);
/** BENCH_PROFILE_INTERVAL_US: the profiles' sampling interval (V8's default, 1000 µs, is too coarse to follow one stream). */
const PROFILE_INTERVAL_US = Number(process.env.BENCH_PROFILE_INTERVAL_US ?? 1000);
const ONLY = new Set((process.env.BENCH_ONLY ?? "rest,grpc,streams,memory,render").split(",").map((s) => s.trim()));
const PROFILE_DIR = process.env.BENCH_PROFILE;
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";
const IMAGE_MODEL = "aimodel-2.5-flash-image";
const TEXT_MODEL = "aimodel-3.5-flash";
const GENERATION_BODY = JSON.stringify({ model: IMAGE_MODEL, prompt: "a lighthouse at dusk, oil painting" });
const TEXT_BODY = JSON.stringify({ contents: [{ role: "user", parts: [{ text: "Say something short." }] }] });
const ROOT = new URL("..", import.meta.url).pathname;
const GHZ = process.env.GHZ ?? findGoTool("ghz");
/** The node flags `npm start` runs the service with (package.json's start script), so the service is measured as it runs. */
const START_FLAGS = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts.start as string)
  .replace(/^node\s+/, "").split(/\s+/).filter((word) => word.startsWith("--"));

function findGoTool(name: string): string {
  try {
    const bin = execFileSync("go", ["env", "GOBIN"], { encoding: "utf8" }).trim() || join(execFileSync("go", ["env", "GOPATH"], { encoding: "utf8" }).trim(), "bin");
    return join(bin, name);
  } catch {
    return name;
  }
}

// ---------------------------------------------------------------- processes

interface ServerProcess {
  readonly pid: number;
  readonly url?: string;
  readonly grpcUrl?: string;
  rssMb(): number;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();

async function startServer(kind: string, env: Record<string, string> = {}, name = kind): Promise<ServerProcess> {
  const profile = PROFILE_DIR
    ? ["--cpu-prof", `--cpu-prof-dir=${join(PROFILE_DIR, name)}`, `--cpu-prof-interval=${PROFILE_INTERVAL_US}`]
    : [];
  // Compiled (main() runs `npm run build` first), as `npm start` runs the service: no tsx loader in the measured process.
  const flags = kind === "service" ? (process.env.BENCH_SERVICE_FLAGS?.split(" ") ?? START_FLAGS) : [];
  const child = spawn(process.execPath, [...flags, ...profile, join(ROOT, "dist/bench/servers.js"), kind], {
    cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"],
  });
  running.add(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => { running.delete(child); resolve(); }));
  const first = await new Promise<Record<string, string>>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once("line", (line) => resolve(JSON.parse(line)));
    child.once("exit", (code) => reject(new Error(`${kind} exited with ${code} before it was ready`)));
  });
  child.stdout!.resume();
  return {
    pid: child.pid!,
    url: first.url,
    grpcUrl: first.grpcUrl,
    rssMb: () => rssMb(child.pid!),
    stop: async () => {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

const CLOCK_TICKS = Number(sh("getconf", ["CLK_TCK"])) || 100;

function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"));
  return Number(line?.match(/(\d+)/)?.[1] ?? NaN) / 1024;
}

/** CPU seconds a process has used, in user space and in the kernel (utime, stime), from /proc. */
function cpuTimes(pid: number): { user: number; kernel: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return { user: Number(fields[11]) / CLOCK_TICKS, kernel: Number(fields[12]) / CLOCK_TICKS };
}

/** What a server used while measured: cores, and the share of that time spent in the kernel (system calls: socket reads and writes, the file's writes and locks). */
interface ServerCpu {
  readonly serverCores: number;
  readonly kernelShare: number;
}

/** Starts measuring a server's CPU; the returned function reads it over the time since. */
function cpuMeter(pid: number): () => ServerCpu {
  const start = cpuTimes(pid);
  const t0 = performance.now();
  return () => {
    const now = cpuTimes(pid);
    const user = now.user - start.user;
    const kernel = now.kernel - start.kernel;
    return { serverCores: (user + kernel) / ((performance.now() - t0) / 1000), kernelShare: user + kernel > 0 ? kernel / (user + kernel) : 0 };
  };
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    running.add(child);
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.once("exit", (code) => {
      running.delete(child);
      if (code === 0) resolve(out);
      else reject(new Error(`${command} exited ${code}: ${err.slice(-500)}`));
    });
  });
}

// ---------------------------------------------------------------- load generators

interface Load {
  readonly name: string;
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly requests: number;
  readonly failed: number;
  /** CPU cores the server process used while measured. */
  readonly serverCores: number;
  /** The share of that CPU spent in the kernel. */
  readonly kernelShare: number;
  readonly note?: string;
}

interface HttpTarget {
  readonly url: string;
  readonly method?: "GET" | "POST";
  readonly headers?: Record<string, string>;
  readonly body?: string;
  readonly expect: number;
  /** Stop after this many requests instead of after the duration. */
  readonly amount?: number;
}

function autocannonArgs(target: HttpTarget, seconds: number): string[] {
  const args = [join(ROOT, "node_modules/autocannon/autocannon.js"), "--json", "-c", String(CONNECTIONS), "-m", target.method ?? "GET"];
  if (target.amount) args.push("-a", String(target.amount));
  else args.push("-d", String(seconds));
  for (const [name, value] of Object.entries(target.headers ?? {})) args.push("-H", `${name}=${value}`);
  if (target.body) args.push("-H", "content-type=application/json", "-b", target.body);
  args.push(target.url);
  return args;
}

async function autocannon(name: string, target: HttpTarget, server: ServerProcess): Promise<Load> {
  if (!target.amount && WARMUP_S > 0) await run(process.execPath, autocannonArgs(target, WARMUP_S));
  const cpu = cpuMeter(server.pid);
  const out = JSON.parse(await run(process.execPath, autocannonArgs(target, DURATION_S)));
  const statusOk = target.expect >= 200 && target.expect < 300;
  const failed = out.errors + out.timeouts + (statusOk ? out.non2xx : 0);
  const load: Load = {
    name, rps: out.requests.total / out.duration, p50: out.latency.p50, p99: out.latency.p99, requests: out.requests.total,
    failed, ...cpu(),
  };
  report(load);
  return load;
}

async function ghz(name: string, grpcUrl: string, apiKey: string, jobId: string, server: ServerProcess): Promise<Load> {
  const host = new URL(grpcUrl).host;
  // A run bounded by time (-z) cancels the calls in flight when it ends and counts them as failed;
  // the measured run is bounded by a count instead: what the warm-up managed in as many seconds.
  const args = (bound: string[]) => [
    "--insecure", "--proto", "proto/generation/v1/generation_service.proto", "--import-paths", "proto",
    "--call", "generation.v1.GenerationService.GetJob", "-d", JSON.stringify({ job_id: jobId }),
    "-m", JSON.stringify({ authorization: `Bearer ${apiKey}` }),
    "--connections", "4", "-c", String(CONNECTIONS), ...bound, "--format", "json", host,
  ];
  const warm = JSON.parse(await run(GHZ, args(["-z", `${Math.max(1, WARMUP_S)}s`])));
  const count = Math.max(CONNECTIONS * 10, Math.round(warm.rps * DURATION_S));
  const cpu = cpuMeter(server.pid);
  const out = JSON.parse(await run(GHZ, args(["-n", String(count)])));
  const at = (p: number) => (out.latencyDistribution ?? []).find((d: { percentage: number }) => d.percentage === p)?.latency / 1e6;
  const failed = Object.entries(out.statusCodeDistribution ?? {}).filter(([code]) => code !== "OK").reduce((n, [, c]) => n + (c as number), 0);
  const load: Load = { name, rps: out.rps, p50: at(50), p99: at(99), requests: out.count, failed, ...cpu() };
  report(load);
  return load;
}

/** A stream run, with the server's CPU over it: in cores, and in milliseconds per stream (at the run's steady rate). */
type StreamLoad = StreamResult & ServerCpu & { readonly cpuMsPerStream: number };

async function streams(name: string, url: string, headers: Record<string, string>, concurrency: number, server: ServerProcess): Promise<StreamLoad> {
  const spec: StreamRun = { url, headers, body: TEXT_BODY, concurrency, durationMs: DURATION_S * 1000, warmupMs: WARMUP_S * 1000 };
  const cpu = cpuMeter(server.pid);
  const out = JSON.parse(await run(process.execPath, ["--import", "tsx", join(ROOT, "bench/stream-client.ts"), JSON.stringify(spec)])) as StreamResult;
  const { serverCores, kernelShare } = cpu();
  const cpuMsPerStream = (serverCores * 1000) / (out.streams / (out.elapsedMs / 1000));
  process.stderr.write(
    `· ${name}: ${out.streams} streams, first event p50 ${fmt(out.firstEvent.p50)} p99 ${fmt(out.firstEvent.p99)} ms, ` +
      `whole p50 ${fmt(out.whole.p50)} p99 ${fmt(out.whole.p99)} ms, failures ${out.failures}, server ${fmt(serverCores)} cores (${percent(kernelShare)} in the kernel), ` +
      `${fmt(cpuMsPerStream)} ms CPU per stream` +
      `${out.own ? `; own time before the first event (its Server-Timing) p50 ${fmt(out.own.p50)} p99 ${fmt(out.own.p99)} ms` : ""}\n`,
  );
  return { ...out, serverCores, kernelShare, cpuMsPerStream };
}

/** A share as a whole percentage. */
const percent = (share: number) => `${Math.round(share * 100)} %`;

/** A load's server CPU as the table gives it: cores, and the kernel's share of them. */
const cpuCell = (cpu: ServerCpu) => `${fmt(cpu.serverCores)} (${percent(cpu.kernelShare)})`;

function report(load: Load): void {
  process.stderr.write(`· ${load.name}: ${fmt(load.rps, 0)} req/s, p50 ${fmt(load.p50)} ms, p99 ${fmt(load.p99)} ms, failed ${load.failed}, server ${fmt(load.serverCores)} cores (${percent(load.kernelShare)} in the kernel)\n`);
}

const fmt = (n: number | undefined, digits = 2) => (n !== undefined && Number.isFinite(n) ? n.toFixed(digits) : "–");
/** Time added over a baseline, signed: a gateway's p99 can come out below the upstream's own in a noisy run. */
const added = (ms: number) => (ms < 0 ? `−${fmt(-ms)}` : `+${fmt(ms)}`);

// ---------------------------------------------------------------- service setup

async function json(url: string, init: RequestInit & { expect: number }): Promise<any> {
  const response = await fetch(url, init);
  const text = await response.text();
  if (response.status !== init.expect) throw new Error(`${init.method ?? "GET"} ${url} answered ${response.status}: ${text}`);
  return text ? JSON.parse(text) : undefined;
}

async function customer(url: string, balance = "100000000"): Promise<string> {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" };
  const account = await json(`${url}/admin/v1/accounts`, { method: "POST", headers: admin, body: JSON.stringify({ name: "bench", balance }), expect: 201 });
  const key = await json(`${url}/admin/v1/accounts/${account.account_id}/keys`, { method: "POST", headers: admin, body: JSON.stringify({ models: ["*"] }), expect: 201 });
  return key.api_key as string;
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

async function doneJob(url: string, apiKey: string): Promise<any> {
  const auth = { authorization: `Bearer ${apiKey}` };
  const accepted = await json(`${url}/api/v1/generations`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: GENERATION_BODY, expect: 202 });
  return until("setup job done", 30_000, async () => {
    const job = await json(`${url}/api/v1/jobs/${accepted.job_id}`, { headers: auth, expect: 200 });
    if (job.status === "failed") throw new Error(`setup job failed: ${JSON.stringify(job)}`);
    return job.status === "done" ? job : undefined;
  });
}

async function reservedOf(url: string, apiKey: string): Promise<string> {
  return (await json(`${url}/api/v1/balance`, { headers: { authorization: `Bearer ${apiKey}` }, expect: 200 })).reserved as string;
}

let dataDirs: string[] = [];

/** The service's environment: the durable default in a fresh DATA_DIR, quiet, no simulated wait. */
function serviceEnv(extra: Record<string, string> = {}): Record<string, string> {
  const dir = mkdtempSync(join(os.tmpdir(), "gen-bench-"));
  dataDirs.push(dir);
  return {
    HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", METRICS_PORT: "0", ADMIN_TOKEN, DATA_DIR: dir,
    SIMULATED_LATENCY_MS: "0", LOG_LEVEL: "warn", DRAIN_DELAY: "0ms", SHUTDOWN_GRACE: "2s",
    // One account carries the whole load: the per-account queue cap (1000 by default) would refuse the rest.
    MAX_QUEUED_JOBS_PER_ACCOUNT: "10000000",
    ...extra,
  };
}

// ---------------------------------------------------------------- sections

interface Row { readonly route: string; readonly ours: string; readonly bare: string; readonly ratio: string; readonly clean: boolean }

const rows: Row[] = [];
const details: string[] = [];

function ratioRow(route: string, ours: Load, bare: Load): void {
  const ratio = ours.rps / bare.rps;
  const clean = ours.failed === 0 && bare.failed === 0;
  rows.push({
    route, ours: `${fmt(ours.rps, 0)} req/s, p50 ${fmt(ours.p50)} / p99 ${fmt(ours.p99)} ms`,
    bare: `${fmt(bare.rps, 0)} req/s, p50 ${fmt(bare.p50)} / p99 ${fmt(bare.p99)} ms`,
    ratio: `${fmt(ratio)}×`, clean,
  });
  details.push(`| ${ours.name} | ${fmt(ours.rps, 0)} | ${fmt(ours.p50)} | ${fmt(ours.p99)} | ${ours.requests} | ${ours.failed} | ${cpuCell(ours)} |`);
  details.push(`| ${bare.name} | ${fmt(bare.rps, 0)} | ${fmt(bare.p50)} | ${fmt(bare.p99)} | ${bare.requests} | ${bare.failed} | ${cpuCell(bare)} |`);
}

/** A route against its floor (the least its work costs), beside the floor against bare. */
function floorRow(route: string, ours: Load, floor: Load, bare: Load): void {
  rows.push({
    route, ours: `${fmt(ours.rps, 0)} req/s`, bare: `${fmt(floor.rps, 0)} req/s (${fmt(floor.rps / bare.rps)}× bare)`, ratio: `${fmt(ours.rps / floor.rps)}×`,
    clean: ours.failed === 0 && floor.failed === 0,
  });
  details.push(`| ${floor.name} | ${fmt(floor.rps, 0)} | ${fmt(floor.p50)} | ${fmt(floor.p99)} | ${floor.requests} | ${floor.failed} | ${cpuCell(floor)} |`);
}

async function restSection(): Promise<{ apiKey: string; job: any; service: ServerProcess }> {
  const service = await startServer("service", serviceEnv(), "rest-get");
  const apiKey = await customer(service.url!);
  const job = await doneJob(service.url!, apiKey);
  const bare = await startServer("bare-http", { BENCH_JOB_JSON: JSON.stringify(job) });
  try {
    const auth = { authorization: `Bearer ${apiKey}` };
    const bareGet = await autocannon("bare Fastify GET /baseline/:id", { url: `${bare.url}/baseline/${job.job_id}`, expect: 200 }, bare);
    const get = await autocannon("GET /api/v1/jobs/{id}", { url: `${service.url}/api/v1/jobs/${job.job_id}`, headers: auth, expect: 200 }, service);
    ratioRow("`GET /api/v1/jobs/{id}`", get, bareGet);
    // The floor: the key looked up, the job's row read and its owner compared, its stored JSON answered; nothing else.
    const floorGet = await startServer("floor-get", { BENCH_JOB_JSON: JSON.stringify(job), BENCH_API_KEY: apiKey });
    try {
      const floor = await autocannon("floor: Fastify GET /floor/:id, key looked up, job row read from SQLite", { url: `${floorGet.url}/floor/${job.job_id}`, headers: auth, expect: 200 }, floorGet);
      floorRow("`GET /api/v1/jobs/{id}` against its floor", get, floor, bareGet);
    } finally {
      await floorGet.stop();
    }

    const noWorker = await startServer("service", serviceEnv({ BENCH_NO_WORKERS: "1" }), "rest-post");
    try {
      const key = await customer(noWorker.url!);
      const barePost = await autocannon("bare Fastify POST /baseline", { url: `${bare.url}/baseline`, method: "POST", body: GENERATION_BODY, expect: 202 }, bare);
      const post = await autocannon(
        "POST /api/v1/generations, no worker", { url: `${noWorker.url}/api/v1/generations`, method: "POST", headers: { authorization: `Bearer ${key}` }, body: GENERATION_BODY, expect: 202 }, noWorker,
      );
      ratioRow("`POST /api/v1/generations`, no worker", post, barePost);
      // The floor: the same durable writes, in one transaction, behind the same group commit, and nothing else.
      const floor = await startServer("floor-http");
      try {
        const floorPost = await autocannon("floor: Fastify POST /floor, one durable SQLite transaction", { url: `${floor.url}/floor`, method: "POST", body: GENERATION_BODY, expect: 202 }, floor);
        floorRow("`POST /api/v1/generations`, no worker, against its durable floor", post, floorPost, barePost);
      } finally {
        await floor.stop();
      }
    } finally {
      await noWorker.stop();
    }
    return { apiKey, job, service };
  } finally {
    await bare.stop();
  }
}

async function grpcSection(service: ServerProcess, apiKey: string, job: any): Promise<void> {
  const probe = createClient(GenerationService, createGrpcTransport({ baseUrl: service.grpcUrl! }));
  const real = await probe.getJob(create(GetJobRequestSchema, { jobId: job.job_id }), { headers: { authorization: `Bearer ${apiKey}` } });
  const message = Buffer.from(toBinary(GetJobResponseSchema, real)).toString("base64");
  const grpcJs = await startServer("bare-grpc", { BENCH_JOB_MESSAGE: message });
  const connect = await startServer("bare-connect", { BENCH_JOB_MESSAGE: message });
  try {
    const bare = await ghz("plain @grpc/grpc-js server, GetJob (fixed reply)", grpcJs.grpcUrl!, apiKey, job.job_id, grpcJs);
    const bareConnect = await ghz("bare connect-node h2c server, GetJob (fixed reply)", connect.grpcUrl!, apiKey, job.job_id, connect);
    const core = await ghz("core port: gRPC GenerationService.GetJob", service.grpcUrl!, apiKey, job.job_id, service);
    ratioRow("gRPC `GetJob` on the core port", core, bare);
    details.push(`| ${bareConnect.name} | ${fmt(bareConnect.rps, 0)} | ${fmt(bareConnect.p50)} | ${fmt(bareConnect.p99)} | ${bareConnect.requests} | ${bareConnect.failed} | ${cpuCell(bareConnect)} |`);
  } finally {
    await grpcJs.stop();
    await connect.stop();
  }
}

async function streamSection(): Promise<void> {
  const path = `models/${TEXT_MODEL}:streamGenerateContent?alt=sse`;
  // One stream at a time: a short stream (8 events 2 ms apart), so that a p99 rests on hundreds of streams;
  // 64 at a time: a model's pace (8 events 25 ms apart).
  for (const [concurrency, gapMs] of [[1, 2], [64, 25]] as const) {
    const upstream = await startServer("upstream", { BENCH_UPSTREAM_GAP_MS: String(gapMs) }, `upstream-${concurrency}`);
    const service = await startServer("service", serviceEnv({ VENDOR_BASE_URL: upstream.url!, VENDOR_API_KEY: "bench-upstream-key" }), `streams-${concurrency}`);
    const proxy = await startServer("bare-proxy", { BENCH_UPSTREAM_URL: upstream.url! }, `bare-proxy-${concurrency}`);
    const floorProxy = await startServer("floor-proxy", { BENCH_UPSTREAM_URL: upstream.url! }, `floor-proxy-${concurrency}`);
    try {
      const apiKey = await customer(service.url!);
      const direct = await streams(`upstream directly, ${concurrency} in flight`, `${upstream.url}/v1beta/${path}`, { "x-vendor-api-key": "bench-upstream-key" }, concurrency, upstream);
      const bareProxy = await streams(`through a bare Fastify proxy, ${concurrency} in flight`, `${proxy.url}/v1beta/${path}`, {}, concurrency, proxy);
      const moneyProxy = await streams(`through the floor proxy (bare, plus a hold and its settlement), ${concurrency} in flight`, `${floorProxy.url}/v1beta/${path}`, {}, concurrency, floorProxy);
      const gateway = await streams(`through the gateway, ${concurrency} in flight`, `${service.url}/api/aimodel/v1beta/${path}`, { "x-goog-api-key": apiKey }, concurrency, service);
      const extra = (a: number, b: number) => a - b;
      const firstP50 = extra(gateway.firstEvent.p50, direct.firstEvent.p50);
      const firstP99 = extra(gateway.firstEvent.p99, direct.firstEvent.p99);
      const wholeP50 = extra(gateway.whole.p50, direct.whole.p50);
      const wholeP99 = extra(gateway.whole.p99, direct.whole.p99);
      const clean = gateway.failures === 0 && direct.failures === 0;
      rows.push({
        route: `\`streamGenerateContent?alt=sse\`, ${concurrency} in flight: time to first event`,
        ours: `p50 ${fmt(gateway.firstEvent.p50)} / p99 ${fmt(gateway.firstEvent.p99)} ms`,
        bare: `p50 ${fmt(direct.firstEvent.p50)} / p99 ${fmt(direct.firstEvent.p99)} ms`,
        ratio: `${added(firstP50)} / ${added(firstP99)} ms`,
        clean,
      });
      rows.push({
        route: `\`streamGenerateContent?alt=sse\`, ${concurrency} in flight: whole stream`,
        ours: `p50 ${fmt(gateway.whole.p50)} / p99 ${fmt(gateway.whole.p99)} ms`,
        bare: `p50 ${fmt(direct.whole.p50)} / p99 ${fmt(direct.whole.p99)} ms`,
        ratio: `${added(wholeP50)} / ${added(wholeP99)} ms`,
        clean,
      });
      details.push(`| streams through the gateway, ${concurrency} in flight (events ${gapMs} ms apart) | ${fmt(gateway.streams / (gateway.elapsedMs / 1000), 0)} | ${fmt(gateway.firstEvent.p50)} (first event) | ${fmt(gateway.firstEvent.p99)} (first event) | ${gateway.streams} | ${gateway.failures} | ${cpuCell(gateway)}; ${fmt(gateway.cpuMsPerStream)} ms per stream |`);
      details.push(`| streams from the upstream directly, ${concurrency} in flight (events ${gapMs} ms apart) | ${fmt(direct.streams / (direct.elapsedMs / 1000), 0)} | ${fmt(direct.firstEvent.p50)} (first event) | ${fmt(direct.firstEvent.p99)} (first event) | ${direct.streams} | ${direct.failures} | ${cpuCell(direct)}; ${fmt(direct.cpuMsPerStream)} ms per stream |`);
      for (const [label, floor] of [["a bare Fastify proxy (the floor of any gateway in Node)", bareProxy], ["the floor proxy: bare, plus one SQLite hold before the upstream call and one settlement after", moneyProxy]] as const) {
        details.push(`| streams through ${label}, ${concurrency} in flight (events ${gapMs} ms apart) | ${fmt(floor.streams / (floor.elapsedMs / 1000), 0)} | ${fmt(floor.firstEvent.p50)} (first event) | ${fmt(floor.firstEvent.p99)} (first event) | ${floor.streams} | ${floor.failures} | ${cpuCell(floor)}; ${fmt(floor.cpuMsPerStream)} ms per stream |`);
        rows.push({
          route: `\`streamGenerateContent?alt=sse\`, ${concurrency} in flight, ${label}`,
          ours: `first event p50 ${fmt(floor.firstEvent.p50)} / p99 ${fmt(floor.firstEvent.p99)} ms; whole p50 ${fmt(floor.whole.p50)} / p99 ${fmt(floor.whole.p99)} ms`,
          bare: "the upstream directly",
          ratio: `${added(floor.firstEvent.p50 - direct.firstEvent.p50)} / ${added(floor.firstEvent.p99 - direct.firstEvent.p99)} ms; whole ${added(floor.whole.p50 - direct.whole.p50)} / ${added(floor.whole.p99 - direct.whole.p99)} ms`,
          clean: floor.failures === 0 && direct.failures === 0,
        });
      }
    } finally {
      await proxy.stop();
      await floorProxy.stop();
      await service.stop();
      await upstream.stop();
    }
  }
}

async function memorySection(): Promise<void> {
  const service = await startServer("service", serviceEnv(), "memory");
  try {
    await sleep(2000);
    const idle = service.rssMb();
    const apiKey = await customer(service.url!, "1000000000");
    const t0 = performance.now();
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, service.rssMb())), 250);
    const accepted = await autocannon(
      `POST /api/v1/generations × ${JOBS}, worker on`,
      { url: `${service.url}/api/v1/generations`, method: "POST", headers: { authorization: `Bearer ${apiKey}` }, body: GENERATION_BODY, expect: 202, amount: JOBS },
      service,
    ).finally(() => clearInterval(sampler));
    const acceptSeconds = (performance.now() - t0) / 1000;
    const after = service.rssMb();
    await sleep(5000);
    const later = service.rssMb();
    rows.push({ route: "embedded default, idle RSS", ours: `${fmt(idle, 0)} MB`, bare: "–", ratio: "–", clean: true });
    rows.push({
      route: `embedded default, RSS after ${JOBS} accepted jobs (worker rendering)`, ours: `${fmt(after, 0)} MB at the last acceptance, ${fmt(later, 0)} MB 5 s later (highest while accepting: ${fmt(peak, 0)} MB)`,
      bare: "–", ratio: "–", clean: accepted.failed === 0 && accepted.requests >= JOBS,
    });
    details.push(`| ${accepted.name} | ${fmt(accepted.requests / acceptSeconds, 0)} | ${fmt(accepted.p50)} | ${fmt(accepted.p99)} | ${accepted.requests} | ${accepted.failed} | ${cpuCell(accepted)} |`);
  } finally {
    await service.stop();
  }
}

async function renderSection(): Promise<void> {
  const rates: number[] = [];
  for (const threads of [1, 2]) {
    const service = await startServer("service", serviceEnv({ SIMULATED_RENDER_THREADS: String(threads), WORKER_CONCURRENCY: "16" }), `render-${threads}`);
    try {
      const apiKey = await customer(service.url!);
      const t0 = performance.now();
      const accepted = await autocannon(
        `POST × ${RENDER_JOBS} with ${threads} render thread(s)`,
        { url: `${service.url}/api/v1/generations`, method: "POST", headers: { authorization: `Bearer ${apiKey}` }, body: GENERATION_BODY, expect: 202, amount: RENDER_JOBS },
        service,
      );
      if (accepted.failed > 0) throw new Error(`render bench: ${accepted.failed} creations failed`);
      await until(`${RENDER_JOBS} jobs rendered`, 300_000, async () => (Number(await reservedOf(service.url!, apiKey)) === 0 ? true : undefined));
      const seconds = (performance.now() - t0) / 1000;
      rates.push(RENDER_JOBS / seconds);
      details.push(`| ${RENDER_JOBS} image jobs accepted and completed, SIMULATED_RENDER_THREADS=${threads} | ${fmt(RENDER_JOBS / seconds, 1)} jobs/s | – | – | ${RENDER_JOBS} | 0 | – |`);
    } finally {
      await service.stop();
    }
  }
  const scaling = rates[1]! / rates[0]!;
  rows.push({
    route: "simulator: image jobs completed per second, SIMULATED_RENDER_THREADS 1 → 2",
    ours: `${fmt(rates[0], 1)} → ${fmt(rates[1], 1)} jobs/s`, bare: "–", ratio: `${fmt(scaling)}×`, clean: true,
  });
}

// ---------------------------------------------------------------- report


async function main(): Promise<void> {
  const loadBefore = os.loadavg();
  const started = performance.now();
  const { commit, dirty } = measuredCommit(ROOT);
  execFileSync("npm", ["run", "--silent", "build"], { cwd: ROOT, stdio: "inherit" });
  let shared: Awaited<ReturnType<typeof restSection>> | undefined;
  if (ONLY.has("rest") || ONLY.has("grpc")) shared = await restSection();
  try {
    if (ONLY.has("grpc")) await grpcSection(shared!.service, shared!.apiKey, shared!.job);
  } finally {
    await shared?.service.stop();
  }
  if (ONLY.has("streams")) await streamSection();
  if (ONLY.has("memory")) await memorySection();
  if (ONLY.has("render")) await renderSection();
  const loadAfter = os.loadavg();
  const model = sh("lscpu", []).split("\n").find((l) => l.startsWith("Model name"))?.replace(/^Model name:\s*/, "") ?? os.cpus()[0]?.model;
  const lines = [
    `Commit ${commit}${dirty}; ${new Date().toISOString()}; \`npm run bench\` (bench/overhead.ts), ${CONNECTIONS} connections (ghz: 4 connections, ${CONNECTIONS} concurrent calls), ${WARMUP_S} s warm-up + ${DURATION_S} s measured per load.`,
    `Machine: ${model}, ${sh("nproc", [])} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, ${os.type()} ${os.release()}.`,
    `Load average (1/5/15 min) at start ${loadBefore.map((n) => n.toFixed(2)).join(" / ")}, at end ${loadAfter.map((n) => n.toFixed(2)).join(" / ")}; ${fmt((performance.now() - started) / 1000, 0)} s in all.`,
    "",
    "| route | this service | floor | ratio or added time | every request answered |",
    "|---|---|---|---:|:---:|",
    ...rows.map((r) => `| ${r.route} | ${r.ours} | ${r.bare} | ${r.ratio} | ${r.clean ? "yes" : "**no**"} |`),
    "",
    "| load | req/s | p50 ms | p99 ms | requests | failed | server CPU: cores (in the kernel) |",
    "|---|---:|---:|---:|---:|---:|---:|",
    ...details,
  ];
  const report = lines.join("\n");
  console.log(report);
  if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, report + "\n");
}

await runBench("bench", main, () => {
  for (const child of running) child.kill("SIGKILL");
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  dataDirs = [];
});
