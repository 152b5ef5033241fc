/**
 * Two builds of the service under the same load, interleaved (A B, B A, …),
 * so that the machine's drift from minute to minute falls on both alike. A
 * change worth microseconds is invisible between two runs of `npm run bench`
 * (their bare baselines move by ±10 %); this shows it.
 *
 *   tsx bench/ab.ts <checkout A> <checkout B> <load> [rounds=4] [seconds=6]
 *
 * Each checkout must have been built (`npm run build`: its dist/). Loads:
 *   get         GET /api/v1/jobs/{id} of a queued job, no worker, autocannon with 32 connections: req/s, p99, server CPU
 *               per request
 *   post        POST /api/v1/generations, no worker, the same
 *   streams-1   streamGenerateContent?alt=sse, one stream in flight (8 events 2 ms apart)
 *   streams-64  the same, 64 in flight (8 events 25 ms apart): first event and whole stream p50/p99, the service's
 *               own time before its first event (Server-Timing), server CPU per stream
 * The load generators and the upstream run from checkout B; each service in a process of its own, the one not
 * under load idle. BENCH_AB_FLAGS_A / BENCH_AB_FLAGS_B: node flags for that side's service (space-separated), to
 * compare one build with two settings (e.g. a V8 heap flag).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import type { StreamResult, StreamRun } from "./stream-client.js";

const [dirA, dirB, load, roundsText = "4", secondsText = "6"] = process.argv.slice(2);
if (!dirA || !dirB || !["get", "post", "streams-1", "streams-64"].includes(load ?? "")) {
  console.error("usage: tsx bench/ab.ts <checkout A> <checkout B> get|post|streams-1|streams-64 [rounds] [seconds]");
  process.exit(2);
}
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";
const CLOCK_TICKS = 100;
const rounds = Number(roundsText);
const seconds = Number(secondsText);
const tools = resolve(dirB);
const children: ChildProcess[] = [];
const dataDirs: string[] = [];

interface Server { readonly child: ChildProcess; readonly url: string }

async function start(root: string, kind: string, env: Record<string, string>, flags: string[] = []): Promise<Server> {
  const child = spawn(process.execPath, [...flags, join(resolve(root), "dist/bench/servers.js"), kind], {
    cwd: resolve(root), env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  const first = await new Promise<{ url: string }>((ready, fail) => {
    createInterface({ input: child.stdout! }).once("line", (line) => ready(JSON.parse(line)));
    child.once("exit", (code) => fail(new Error(`${kind} of ${root} exited with ${code}`)));
  });
  child.stdout!.resume();
  return { child, url: first.url };
}

function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

async function service(root: string, env: Record<string, string>, flags: string[]): Promise<Server & { apiKey: string }> {
  const dataDir = mkdtempSync(join(os.tmpdir(), "bench-ab-"));
  dataDirs.push(dataDir);
  const server = await start(root, "service", {
    HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", METRICS_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir, SIMULATED_LATENCY_MS: "0",
    LOG_LEVEL: "warn", DRAIN_DELAY: "0ms", SHUTDOWN_GRACE: "2s", MAX_QUEUED_JOBS_PER_ACCOUNT: "10000000", ...env,
  }, flags);
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" };
  const account = (await (await fetch(`${server.url}/admin/v1/accounts`, { method: "POST", headers: admin, body: JSON.stringify({ name: "ab", balance: "100000000" }) })).json()) as { account_id: string };
  const key = (await (await fetch(`${server.url}/admin/v1/accounts/${account.account_id}/keys`, { method: "POST", headers: admin, body: JSON.stringify({ models: ["*"] }) })).json()) as { api_key: string };
  return { ...server, apiKey: key.api_key };
}

/** Runs `measure` with the server's CPU counted over it; returns both. */
async function withCpu<T>(server: Server, measure: () => Promise<T>): Promise<{ result: T; cores: number }> {
  const cpu0 = cpuSeconds(server.child.pid!);
  const t0 = performance.now();
  const result = await measure();
  return { result, cores: (cpuSeconds(server.child.pid!) - cpu0) / ((performance.now() - t0) / 1000) };
}

const fmt = (n: number | undefined) => (n === undefined ? "–" : n.toFixed(2));

const GENERATION_BODY = JSON.stringify({ model: "aimodel-2.5-flash-image", prompt: "a lighthouse at dusk, oil painting" });

/** autocannon, 32 connections, against one of the service's routes. */
async function httpRound(server: Server & { apiKey: string }, method: "GET" | "POST", path: string): Promise<string> {
  const args = [
    join(tools, "node_modules/autocannon/autocannon.js"), "--json", "-c", "32", "-m", method, "-d", String(seconds),
    "-H", `authorization=Bearer ${server.apiKey}`,
    ...(method === "POST" ? ["-H", "content-type=application/json", "-b", GENERATION_BODY] : []),
    `${server.url}${path}`,
  ];
  const { result, cores } = await withCpu(server, async () => JSON.parse(execFileSync(process.execPath, args, { encoding: "utf8", maxBuffer: 1 << 26 })));
  const rps = result.requests.average as number;
  return `${rps.toFixed(0)} req/s, p99 ${result.latency.p99} ms, non-2xx ${result.non2xx}, ${(cores * 1e6 / rps).toFixed(0)} µs CPU per request`;
}

/** A queued job of the service's customer (no worker takes it). */
async function queuedJob(server: Server & { apiKey: string }): Promise<string> {
  const answer = await fetch(`${server.url}/api/v1/generations`, {
    method: "POST", headers: { authorization: `Bearer ${server.apiKey}`, "content-type": "application/json" }, body: GENERATION_BODY,
  });
  return ((await answer.json()) as { job_id: string }).job_id;
}

async function streamRound(server: Server & { apiKey: string }, concurrency: number): Promise<string> {
  const spec: StreamRun = {
    url: `${server.url}/api/aimodel/v1beta/models/aimodel-3.5-flash:streamGenerateContent?alt=sse`,
    headers: { "x-goog-api-key": server.apiKey },
    body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "Say something short." }] }] }),
    concurrency, durationMs: seconds * 1000, warmupMs: 1000,
  };
  const { result, cores } = await withCpu(server, async () =>
    JSON.parse(execFileSync(process.execPath, ["--import", "tsx", join(tools, "bench/stream-client.ts"), JSON.stringify(spec)], { cwd: tools, encoding: "utf8" })) as StreamResult,
  );
  const perStream = (cores * 1000) / (result.streams / (result.elapsedMs / 1000));
  return `first event p50 ${fmt(result.firstEvent.p50)} p99 ${fmt(result.firstEvent.p99)} ms, whole p50 ${fmt(result.whole.p50)} p99 ${fmt(result.whole.p99)} ms, ` +
    `own p50 ${fmt(result.own?.p50)} p99 ${fmt(result.own?.p99)} ms, ${fmt(perStream)} ms CPU per stream, failures ${result.failures}`;
}

try {
  const concurrency = load === "streams-64" ? 64 : 1;
  const upstream = !load!.startsWith("streams") ? undefined : await start(tools, "upstream", { BENCH_UPSTREAM_GAP_MS: concurrency === 64 ? "25" : "2" });
  const env: Record<string, string> = upstream ? { VENDOR_BASE_URL: upstream.url, VENDOR_API_KEY: "bench-upstream-key" } : { BENCH_NO_WORKERS: "1" };
  const flagsOf = (name: string) => (process.env[name] ?? "").split(" ").filter(Boolean);
  const a = await service(dirA, env, flagsOf("BENCH_AB_FLAGS_A"));
  const b = await service(dirB, env, flagsOf("BENCH_AB_FLAGS_B"));
  const jobs = load === "get" ? new Map([[a, await queuedJob(a)], [b, await queuedJob(b)]]) : undefined;
  const measure = (server: typeof a) =>
    load === "get" ? httpRound(server, "GET", `/api/v1/jobs/${jobs!.get(server)}`)
      : load === "post" ? httpRound(server, "POST", "/api/v1/generations")
        : streamRound(server, concurrency);
  for (let round = 0; round < rounds; round++) {
    for (const [name, server] of round % 2 === 0 ? ([["A", a], ["B", b]] as const) : ([["B", b], ["A", a]] as const)) {
      console.log(`round ${round} ${name}: ${await measure(server)}`);
    }
  }
} finally {
  for (const child of children) child.kill("SIGTERM");
  await Promise.all(children.map((child) => (child.exitCode !== null ? undefined : new Promise((done) => child.once("exit", done)))));
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
}
