/**
 * `npm run bench:peers` (issue 35): this service beside other gateways, on one machine, in one run, each figure
 * a difference or ratio against the upstream mock called directly (same request kind, concurrency and load
 * generator), as GetBusbar/benchmarking measures gateways.
 *
 * Installs the peers on first use (bench/peers/install.ts), builds the service as `npm start` runs it, starts the
 * Gemini-format mock (bench/servers.ts upstream) for the whole run, measures it directly, then each gateway in
 * turn, alone, every server and every load generator a process of its own:
 *   - non-streamed requests in closed loops at 1, 2, 4, … 128 in flight (bench/peers/request-client.ts), until
 *     the added p99 passes the widest bound or errors appear (never before 32 in flight);
 *   - streams at 1 and 32 in flight (bench/stream-client.ts): first event and whole stream;
 *   - RSS of the process tree idle and after the same load for all (the steps to 32 in flight and the streams);
 *     CPU of the tree over the 32-in-flight window.
 * Prints one markdown table, a sweep table and the goal checks (and writes them to BENCH_OUT when set).
 *
 * Knobs (environment): BENCH_PEERS_DURATION_S (5: measured seconds per step; 1 in flight runs 3× as long, for its
 * p99), BENCH_PEERS_WARMUP_S (1: before each step), BENCH_PEERS_PREWARM_S (5: requests at 32 in flight, and a fifth of
 * that of streams, before the first step), BENCH_PEERS_ONLY (service,portkey,litellm), BENCH_PEERS_STEPS
 * (1,2,4,8,16,32,48,64,96,128), BENCH_PEERS_ANSWER_MS (20), BENCH_PEERS_GAP_MS (0), BENCH_PEERS_NODE_FLAGS (the service's node flags; npm start's), BENCH_OUT.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { measuredCommit, runBench, treePids, treeRssMiB, waitFor } from "../child-processes.js";
import type { StreamResult, StreamRun } from "../stream-client.js";
import { ensurePeers, LITELLM_VERSION, PORTKEY_VERSION, type Peers } from "./install.js";
import { AT, BOUNDS_MS, baselineLine, fmt, goalChecks, row, sweepTable, type Measured } from "./report.js";
import type { RequestResult, RequestRun } from "./request-client.js";

const ROOT = new URL("../..", import.meta.url).pathname;
const RUN_DIR = join(ROOT, ".peers/run");
const DURATION_MS = Number(process.env.BENCH_PEERS_DURATION_S ?? 5) * 1000;
const WARMUP_MS = Number(process.env.BENCH_PEERS_WARMUP_S ?? 1) * 1000;
/** Load before the first step, at AT in flight, not measured: a gateway's code is compiled by its first thousands of requests (steady state, as a served gateway runs). */
const PREWARM_MS = Number(process.env.BENCH_PEERS_PREWARM_S ?? 5) * 1000;
/** One in flight gives few requests a second: it runs longer, so that its p99 rests on hundreds. */
const SINGLE_FACTOR = 3;
const ONLY = (process.env.BENCH_PEERS_ONLY ?? "service,portkey,litellm").split(",").map((s) => s.trim()).filter(Boolean);
const STEPS = (process.env.BENCH_PEERS_STEPS ?? "1,2,4,8,16,32,48,64,96,128").split(",").map(Number);
const STREAM_CONCURRENCY = [1, AT] as const;

/**
 * The mock: every answer takes 20 ms, as "a 20 ms mock" means in the public comparisons: generateContent answers
 * after answerMs (BENCH_PEERS_ANSWER_MS, 20); a stream sends its 10 events after firstMs (20), gapMs apart
 * (BENCH_PEERS_GAP_MS, 0). Every gateway calls generateContent for a non-streamed request (see docs/benchmarks-peers.md).
 */
const MOCK = {
  answerMs: Number(process.env.BENCH_PEERS_ANSWER_MS ?? 20), firstMs: 20, events: 10, gapMs: Number(process.env.BENCH_PEERS_GAP_MS ?? 0),
} as const;
const UPSTREAM_KEY = "bench-upstream-key-0123456789";
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";
const LITELLM_MASTER_KEY = "sk-bench-litellm-master-key";
const SERVICE_MODEL = "aimodel-3.5-flash";
/** The model the peers ask for: one their catalogs know (LiteLLM prices each answer from its cost map). */
const PEER_MODEL = "gemini-2.5-flash";
/** The last token of every answer: an answer without it is not a success. */
const EXPECT = `word${MOCK.events - 1}`;
const PROMPT = "Say something short.";
const VENDOR_BODY = JSON.stringify({ contents: [{ role: "user", parts: [{ text: PROMPT }] }] });
const openAiBody = (stream: boolean) => JSON.stringify({ model: PEER_MODEL, messages: [{ role: "user", content: PROMPT }], ...(stream ? { stream: true } : {}) });
/** The node flags `npm start` runs the service with (package.json's start script), or BENCH_PEERS_NODE_FLAGS to compare others. */
const START_FLAGS = (process.env.BENCH_PEERS_NODE_FLAGS ?? JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts.start as string)
  .replace(/^node\s+/, "").split(/\s+/).filter((word) => word.startsWith("--"));

// ---------------------------------------------------------------- processes

interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly log: string;
  readonly exited: Promise<void>;
}

/** Process groups started and not yet known gone: every one is killed however the bench ends. */
const groups = new Set<number>();

function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // already gone
  }
}

function killAll(): void {
  for (const pgid of groups) killGroup(pgid, "SIGKILL");
  groups.clear();
}

/** A server in a process group of its own, its output in .peers/run/<name>.log. */
function launch(name: string, command: string, args: string[], env: NodeJS.ProcessEnv, cwd = ROOT): Proc {
  const log = join(RUN_DIR, `${name}.log`);
  const fd = openSync(log, "w");
  const child = spawn(command, args, { cwd, env, detached: true, stdio: ["ignore", fd, fd] });
  closeSync(fd);
  groups.add(child.pid!);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return { name, child, log, exited };
}

async function stop(proc: Proc): Promise<void> {
  const pgid = proc.child.pid!;
  if (proc.child.exitCode === null && proc.child.signalCode === null) {
    killGroup(pgid, "SIGTERM");
    const timer = setTimeout(() => killGroup(pgid, "SIGKILL"), 15_000);
    await proc.exited;
    clearTimeout(timer);
  }
  // Children the leader left behind (LiteLLM's workers, should they outlive it).
  killGroup(pgid, "SIGKILL");
  groups.delete(pgid);
}

const logOf = (proc: Proc) => (existsSync(proc.log) ? readFileSync(proc.log, "utf8") : "");

function alive(proc: Proc): void {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
    throw new Error(`${proc.name} exited (${proc.child.exitCode ?? proc.child.signalCode}); the end of its log:\n${logOf(proc).slice(-2000)}`);
  }
}

/** The URL in the {"ready":true,...} line a bench/servers.ts process prints when it listens. */
function readyUrl(proc: Proc, timeoutMs = 60_000): Promise<string> {
  return waitFor(() => {
    alive(proc);
    const line = /^\{"ready":true.*$/m.exec(logOf(proc))?.[0];
    return line ? (JSON.parse(line) as { url: string }).url : undefined;
  }, timeoutMs, `${proc.name} to be ready`);
}

async function untilAnswers(proc: Proc, url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    alive(proc);
    const status = await fetch(url).then((r) => r.status, () => 0);
    if (status === 200) return;
    if (Date.now() > deadline) throw new Error(`${proc.name}: ${url} did not answer 200 within ${timeoutMs} ms; the end of its log:\n${logOf(proc).slice(-2000)}`);
    await sleep(200);
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A load generator: `node --import tsx <script> <json>`, in a process group of its own; its one JSON line. */
function runClient<T>(script: string, spec: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, script), JSON.stringify(spec)], {
      cwd: ROOT, detached: true, stdio: ["ignore", "pipe", "inherit"],
    });
    groups.add(child.pid!);
    let out = "";
    child.stdout!.on("data", (chunk) => (out += chunk));
    child.once("exit", (code) => {
      groups.delete(child.pid!);
      if (code === 0) resolve(JSON.parse(out) as T);
      else reject(new Error(`${script} exited ${code}: ${out.slice(-500)}`));
    });
  });
}

// ---------------------------------------------------------------- targets

interface Target {
  readonly name: string;
  /** What it does per request, as the table says. */
  readonly does: string;
  readonly proc: Proc;
  readonly unary: { url: string; headers: Record<string, string>; body: string };
  readonly stream: { url: string; headers: Record<string, string>; body: string };
  /** Where the mock must see its key come from, and what it must see called for a request and for a stream. */
  readonly carrier: string;
  readonly unaryKind: string;
  readonly streamKind: string;
}

function serviceEnv(mockUrl: string, dataDir: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", METRICS_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir,
    VENDOR_BASE_URL: mockUrl, VENDOR_API_KEY: UPSTREAM_KEY, DRAIN_DELAY: "0ms", SHUTDOWN_GRACE: "2s",
  };
}

async function json(url: string, init: RequestInit & { expect: number }): Promise<Record<string, unknown>> {
  const response = await fetch(url, init);
  const text = await response.text();
  if (response.status !== init.expect) throw new Error(`${init.method ?? "GET"} ${url} answered ${response.status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** An account credited and an API key for it, through the admin API. */
async function apiKeyOf(url: string): Promise<string> {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" };
  const account = await json(`${url}/admin/v1/accounts`, { method: "POST", headers: admin, body: JSON.stringify({ name: "bench-peers", balance: "1000000000" }), expect: 201 });
  const key = await json(`${url}/admin/v1/accounts/${String(account.account_id)}/keys`, { method: "POST", headers: admin, body: JSON.stringify({ models: ["*"] }), expect: 201 });
  return String(key.api_key);
}

async function startService(mockUrl: string, dataDir: string): Promise<Target> {
  const proc = launch("service", process.execPath, [...START_FLAGS, join(ROOT, "dist/bench/servers.js"), "service"], serviceEnv(mockUrl, dataDir));
  const url = await readyUrl(proc);
  const apiKey = await apiKeyOf(url);
  const base = `${url}/api/aimodel/v1beta/models/${SERVICE_MODEL}`;
  const headers = { "x-goog-api-key": apiKey };
  return {
    name: "this service", proc,
    does: "API key checked; money held durably (SQLite) before the upstream call and settled exactly after; a structured log line per request (default level)",
    unary: { url: `${base}:generateContent`, headers, body: VENDOR_BODY },
    stream: { url: `${base}:streamGenerateContent?alt=sse`, headers, body: VENDOR_BODY },
    carrier: "x-vendor-api-key", unaryKind: "generateContent", streamKind: "streamGenerateContent?alt=sse",
  };
}

async function startPortkey(peers: Peers, mockUrl: string): Promise<Target> {
  const port = await freePort();
  const proc = launch("portkey", process.execPath, ["--import", join(ROOT, "bench/peers/loopback-only.mjs"), peers.portkeyServer, `--port=${port}`], { ...process.env });
  const url = `http://127.0.0.1:${port}`;
  await untilAnswers(proc, `${url}/`, 60_000);
  // Portkey's own headers route a request: the provider, the host to call instead of Google's, and the provider's key.
  const headers = { "x-portkey-provider": "google", "x-portkey-custom-host": mockUrl, authorization: `Bearer ${UPSTREAM_KEY}` };
  return {
    name: "Portkey", proc,
    does: "no auth, no budget; its default logging (a log entry per request for its UI's log stream; on a stream it also prints a JSON parse error with its stack, a bug of its own); OpenAI format in, Gemini out",
    unary: { url: `${url}/v1/chat/completions`, headers, body: openAiBody(false) },
    stream: { url: `${url}/v1/chat/completions`, headers, body: openAiBody(true) },
    carrier: "?key=", unaryKind: "generateContent", streamKind: "streamGenerateContent (JSON array)",
  };
}

async function startLiteLlm(peers: Peers, mockUrl: string): Promise<Target> {
  const port = await freePort();
  const config = join(RUN_DIR, "litellm-config.yaml");
  writeFileSync(config, [
    "model_list:",
    `  - model_name: ${PEER_MODEL}`,
    "    litellm_params:",
    `      model: gemini/${PEER_MODEL}`,
    `      api_base: ${mockUrl}/v1beta`,
    `      api_key: ${UPSTREAM_KEY}`,
    "general_settings:",
    `  master_key: ${LITELLM_MASTER_KEY}`,
    "",
  ].join("\n"));
  // No database: the master key is the only key. The cost map is the one it ships with (no fetch from GitHub).
  const env = { ...process.env, LITELLM_LOCAL_MODEL_COST_MAP: "True", PYTHONUNBUFFERED: "1" };
  const proc = launch("litellm", peers.litellm, ["--config", config, "--host", "127.0.0.1", "--port", String(port), "--num_workers", "2"], env, RUN_DIR);
  await waitFor(() => {
    alive(proc);
    return (logOf(proc).match(/Application startup complete/g)?.length ?? 0) >= 2 ? true : undefined;
  }, 180_000, "LiteLLM's two workers");
  const url = `http://127.0.0.1:${port}`;
  await untilAnswers(proc, `${url}/health/liveliness`, 30_000);
  const headers = { authorization: `Bearer ${LITELLM_MASTER_KEY}` };
  return {
    name: "LiteLLM", proc,
    does: "master key checked (no virtual keys, no budget: no database); 2 uvicorn workers; its default logging (an access line per request); OpenAI format in, Gemini out",
    unary: { url: `${url}/v1/chat/completions`, headers, body: openAiBody(false) },
    stream: { url: `${url}/v1/chat/completions`, headers, body: openAiBody(true) },
    carrier: "x-goog-api-key", unaryKind: "generateContent", streamKind: "streamGenerateContent?alt=sse",
  };
}

// ---------------------------------------------------------------- measuring

type Stats = Record<string, number>;
const mockStats = async (mockUrl: string) => (await json(`${mockUrl}/bench/stats`, { expect: 200 })) as Stats;

/** One request and one stream through the target, checked for content, and the mock's count of what it answered for them. */
async function verify(target: Target, mockUrl: string): Promise<void> {
  const before = await mockStats(mockUrl);
  for (const [kind, request] of [["request", target.unary], ["stream", target.stream]] as const) {
    const response = await fetch(request.url, { method: "POST", headers: { ...request.headers, "content-type": "application/json" }, body: request.body });
    const text = await response.text();
    if (response.status !== 200 || !text.includes(EXPECT)) {
      throw new Error(`${target.name}: a ${kind} answered ${response.status} without ${EXPECT}: ${text.slice(0, 500)}`);
    }
  }
  const after = await mockStats(mockUrl);
  const delta = (name: string) => (after[name] ?? 0) - (before[name] ?? 0);
  const seen = Object.keys(after).filter((k) => delta(k) !== 0).map((k) => `${k} +${delta(k)}`).join(", ");
  const expected: Stats = { [`key in ${target.carrier}`]: 2 };
  for (const kind of [target.unaryKind, target.streamKind]) expected[kind] = (expected[kind] ?? 0) + 1;
  if (Object.entries(expected).some(([name, n]) => delta(name) < n) || delta("unauthorized") > 0) {
    throw new Error(`${target.name}: the mock did not see the expected calls (${JSON.stringify(expected)}); it saw: ${seen || "nothing"}`);
  }
  process.stderr.write(`· ${target.name} reaches the mock: ${seen}\n`);
}

const durationAt = (concurrency: number) => (concurrency === 1 ? DURATION_MS * SINGLE_FACTOR : DURATION_MS);

function requests(request: Target["unary"], concurrency: number, pid: number): Promise<RequestResult> {
  const spec: RequestRun = {
    ...request, concurrency, warmupMs: WARMUP_MS, durationMs: durationAt(concurrency), expect: EXPECT, cpuPids: treePids(pid),
  };
  return runClient<RequestResult>("bench/peers/request-client.ts", spec);
}

function streams(request: Target["stream"], concurrency: number): Promise<StreamResult> {
  const spec: StreamRun = { ...request, concurrency, warmupMs: WARMUP_MS, durationMs: durationAt(concurrency), expect: EXPECT };
  return runClient<StreamResult>("bench/stream-client.ts", spec);
}


/**
 * Steps up the concurrency to AT in flight, runs the streams, reads the RSS (so that every gateway's "after load"
 * follows the same load), then steps on past AT until the added p99 passes the widest bound or an error appears.
 */
async function measure(
  name: string, does: string, pid: number, unary: Target["unary"], stream: Target["stream"], baseline: Measured | undefined,
): Promise<Measured> {
  const rssIdle = treeRssMiB(pid);
  if (PREWARM_MS > 0) {
    process.stderr.write(`${name}, warming up: `);
    await runClient<RequestResult>("bench/peers/request-client.ts", {
      ...unary, concurrency: AT, warmupMs: 0, durationMs: PREWARM_MS, expect: EXPECT, cpuPids: [],
    } satisfies RequestRun);
    await runClient<StreamResult>("bench/stream-client.ts", { ...stream, concurrency: AT, warmupMs: 0, durationMs: PREWARM_MS / 5, expect: EXPECT } satisfies StreamRun);
  }
  const results = new Map<number, RequestResult>();
  /** Runs one step; false once a step past AT breaks the widest bound or errs. */
  const step = async (concurrency: number): Promise<boolean> => {
    process.stderr.write(`${name}, requests: `);
    const result = await requests(unary, concurrency, pid);
    results.set(concurrency, result);
    const base = baseline?.unary.get(concurrency);
    const added = base ? result.p99 - base.p99 : NaN;
    if (result.errors > 0) process.stderr.write(`  ${result.errors} errors, e.g. ${result.errorSamples.join(" | ")}\n`);
    return !(baseline && concurrency > AT && (result.errors > 0 || !(added <= Math.max(...BOUNDS_MS))));
  };
  for (const concurrency of STEPS.filter((c) => c <= AT)) await step(concurrency);
  const streamResults = new Map<number, StreamResult>();
  for (const concurrency of STREAM_CONCURRENCY) {
    const result = await streams(stream, concurrency);
    process.stderr.write(
      `${name}, streams: ${concurrency} in flight, ${result.streams} streams, first event p50 ${fmt(result.firstEvent.p50)} p99 ${fmt(result.firstEvent.p99)} ms, ` +
        `whole p50 ${fmt(result.whole.p50)} p99 ${fmt(result.whole.p99)} ms, failures ${result.failures}${result.failures ? ` (${result.failureSamples.join(" | ")})` : ""}\n`,
    );
    streamResults.set(concurrency, result);
  }
  const rssAfter = treeRssMiB(pid);
  for (const concurrency of STEPS.filter((c) => c > AT)) if (!(await step(concurrency))) break;
  return { name, does, unary: results, streams: streamResults, rssIdle, rssAfter };
}


// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const started = performance.now();
  mkdirSync(RUN_DIR, { recursive: true });
  const unknown = ONLY.filter((name) => !["service", "portkey", "litellm"].includes(name));
  if (unknown.length) throw new Error(`BENCH_PEERS_ONLY: unknown ${unknown.join(", ")} (service, portkey, litellm)`);
  const peers = ensurePeers(ROOT);
  process.stderr.write(`· ${peers.bifrost}\n`);
  // Compiled, as `npm start` runs the service: no TypeScript loader in the measured process.
  execFileSync("npm", ["run", "--silent", "build"], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
  const { commit, dirty } = measuredCommit(ROOT);
  const mock = launch("mock", process.execPath, [join(ROOT, "dist/bench/servers.js"), "upstream"], {
    ...process.env, BENCH_UPSTREAM_FIRST_MS: String(MOCK.firstMs), BENCH_UPSTREAM_ANSWER_MS: String(MOCK.answerMs), BENCH_UPSTREAM_EVENTS: String(MOCK.events),
    BENCH_UPSTREAM_GAP_MS: String(MOCK.gapMs), BENCH_UPSTREAM_KEY: UPSTREAM_KEY,
  });
  const dataDir = mkdtempSync(join(os.tmpdir(), "bench-peers-"));
  const all: Measured[] = [];
  let base: Measured;
  try {
    const mockUrl = await readyUrl(mock);
    const direct = { url: `${mockUrl}/v1beta/models/${PEER_MODEL}`, headers: { "x-goog-api-key": UPSTREAM_KEY } };
    base = await measure(
      "mock directly", "the baseline", mock.child.pid!,
      { url: `${direct.url}:generateContent`, headers: direct.headers, body: VENDOR_BODY },
      { url: `${direct.url}:streamGenerateContent?alt=sse`, headers: direct.headers, body: VENDOR_BODY },
      undefined,
    );
    const starters: Record<string, () => Promise<Target>> = {
      service: () => startService(mockUrl, dataDir),
      portkey: () => startPortkey(peers, mockUrl),
      litellm: () => startLiteLlm(peers, mockUrl),
    };
    for (const name of ONLY) {
      const target = await starters[name]!();
      try {
        await sleep(2000);
        // Idle: read before the first request (measure reads it first), so the verification comes after it.
        const idle = treeRssMiB(target.proc.child.pid!);
        await verify(target, mockUrl);
        const measured = await measure(target.name, target.does, target.proc.child.pid!, target.unary, target.stream, base);
        alive(target.proc);
        all.push({ ...measured, rssIdle: idle });
      } finally {
        await stop(target.proc);
      }
    }
  } finally {
    await stop(mock);
    rmSync(dataDir, { recursive: true, force: true });
  }
  const streamMs = MOCK.firstMs + (MOCK.events - 1) * MOCK.gapMs;
  const cpuModel = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? os.cpus()[0]?.model ?? "?";
  const lines = [
    `Machine: ${cpuModel}, ${os.cpus().length} cores · commit ${commit}${dirty} · Portkey @portkey-ai/gateway ${PORTKEY_VERSION} · ` +
      `LiteLLM ${LITELLM_VERSION} (litellm[proxy], ${peers.pythonVersion}) · Node ${process.version} · ${new Date().toISOString()} · ` +
      `${fmt((performance.now() - started) / 1000, 0)} s in all`,
    "",
    `Mock upstream (Gemini wire format): generateContent answers after ${MOCK.answerMs} ms; streamGenerateContent sends ${MOCK.events} events, ` +
      `the first after ${MOCK.firstMs} ms, then ${MOCK.gapMs} ms apart (${streamMs} ms in all: a model takes as long either way), each with cumulative usageMetadata. ` +
      `Every figure is the gateway's minus the mock's ` +
      `called directly, same request kind, concurrency and load generator. Before the first step, ${PREWARM_MS / 1000} s of requests at ${AT} in flight and ${PREWARM_MS / 5000} s of streams, unmeasured (steady state). Closed loops, ${WARMUP_MS / 1000} s warm-up + ${DURATION_MS / 1000} s measured ` +
      `per step (${(DURATION_MS * SINGLE_FACTOR) / 1000} s at 1 in flight). Bounds apply to the added p99; "(n)" is the concurrency it was reached at. ` +
      `CPU: the server's process tree over the ${AT}-in-flight window. RSS: the process tree, MiB, idle and after the steps to ${AT} in flight and the streams.`,
    "",
    `| gateway: what it does per request | added p50 / p99 at 1, ms | req/s, added p99 ≤ ${BOUNDS_MS[0]} ms | req/s, added p99 ≤ ${BOUNDS_MS[1]} ms | req/s at ${AT} | ` +
      `stream first event added p50 / p99 at 1, ms | … at ${AT}, ms | whole stream added p50 / p99 at 1, ms | … at ${AT}, ms | CPU s per 1,000 requests | RSS idle → after load, MiB | errors |`,
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ...all.map((m) => row(m, base)),
    "",
    baselineLine(base),
    "",
    peers.bifrost,
    "",
    "Goal checks:",
    ...goalChecks(all, base),
    "",
    "The sweep (non-streamed requests), every step run:",
    "",
    ...sweepTable(all, base, STEPS),
  ];
  const report = lines.join("\n");
  console.log(report);
  if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, `${report}\n`);
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    process.stderr.write(`bench:peers: ${signal}, stopping every process it started\n`);
    killAll();
    process.exit(130);
  });
}
process.once("exit", killAll);
await runBench("bench:peers", main, killAll);
