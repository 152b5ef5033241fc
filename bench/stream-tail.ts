/**
 * The first event's tail with many streams in flight (issue 35): the vendor
 * upstream (bench/servers.ts `upstream`) called directly and through the
 * service, each a process of its own, with the stream client
 * (bench/stream-client.ts) as a third. Prints time to the first event and to
 * the stream's end, added over the upstream called directly, and the
 * service's own time before its first event (Server-Timing).
 *
 *   npm run build && tsx bench/stream-tail.ts
 *
 * Knobs (environment): BENCH_TAIL_CONCURRENCY (1,32), BENCH_DURATION_S (10), BENCH_WARMUP_S (2),
 * BENCH_UPSTREAM_EVENTS (10), BENCH_UPSTREAM_GAP_MS (5), BENCH_SERVICE_ENV (extra settings for the service,
 * JSON), BENCH_SERVICE_FLAGS (node flags for the service, space-separated; by default those of `npm start`),
 * BENCH_PROFILE (a directory: the service runs with --cpu-prof into it).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { StreamResult, StreamRun } from "./stream-client.js";

const ROOT = new URL("..", import.meta.url).pathname;
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";
const CONCURRENCY = (process.env.BENCH_TAIL_CONCURRENCY ?? "1,32").split(",").map(Number);
const DURATION_MS = Number(process.env.BENCH_DURATION_S ?? 10) * 1000;
const WARMUP_MS = Number(process.env.BENCH_WARMUP_S ?? 2) * 1000;
const PATH = "models/aimodel-3.5-flash:streamGenerateContent?alt=sse";
const BODY = JSON.stringify({ contents: [{ role: "user", parts: [{ text: "Say something short." }] }] });
const START_FLAGS = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts.start as string)
  .replace(/^node\s+/, "").split(/\s+/).filter((word) => word.startsWith("--"));

const children = new Set<ChildProcess>();
process.on("exit", () => { for (const child of children) child.kill("SIGKILL"); });

async function server(kind: string, env: Record<string, string>, flags: string[] = []): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [...flags, join(ROOT, "dist/bench/servers.js"), kind], {
    cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"],
  });
  children.add(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => { children.delete(child); resolve(); }));
  const first = await new Promise<{ url: string }>((resolve, reject) => {
    // Anything else on stdout (a --trace-gc line) goes to stderr.
    createInterface({ input: child.stdout! }).on("line", (line) => (line.startsWith('{"ready"') ? resolve(JSON.parse(line)) : process.stderr.write(`${line}\n`)));
    child.once("exit", (code) => reject(new Error(`${kind} exited with ${code} before it was ready`)));
  });
  return { url: first.url, stop: async () => { child.kill("SIGTERM"); await exited; } };
}

function streams(url: string, headers: Record<string, string>, concurrency: number): Promise<StreamResult> {
  const run: StreamRun = { url, headers, body: BODY, concurrency, durationMs: DURATION_MS, warmupMs: WARMUP_MS };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "bench/stream-client.ts"), JSON.stringify(run)], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
    children.add(child);
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.once("exit", (code) => { children.delete(child); if (code === 0) resolve(JSON.parse(out)); else reject(new Error(`stream client exited ${code}`)); });
  });
}

async function apiKey(url: string): Promise<string> {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" };
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${url}${path}`, { method: "POST", headers: admin, body: JSON.stringify(body) });
    if (response.status !== 201) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return response.json() as Promise<Record<string, string>>;
  };
  const account = await post("/admin/v1/accounts", { name: "bench", balance: "100000000" });
  return (await post(`/admin/v1/accounts/${account.account_id}/keys`, { models: ["*"] })).api_key!;
}

const f = (n: number) => n.toFixed(1);
const dataDir = mkdtempSync(join(os.tmpdir(), "gen-tail-"));
const upstream = await server("upstream", {
  BENCH_UPSTREAM_EVENTS: process.env.BENCH_UPSTREAM_EVENTS ?? "10", BENCH_UPSTREAM_GAP_MS: process.env.BENCH_UPSTREAM_GAP_MS ?? "5",
});
const profile = process.env.BENCH_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE}`, "--cpu-prof-interval=250"] : [];
const service = await server("service", {
  HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", METRICS_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir, LOG_LEVEL: "warn",
  DRAIN_DELAY: "0ms", SHUTDOWN_GRACE: "2s", VENDOR_BASE_URL: upstream.url, VENDOR_API_KEY: "bench-upstream-key",
  ...(JSON.parse(process.env.BENCH_SERVICE_ENV ?? "{}") as Record<string, string>),
}, [...(process.env.BENCH_SERVICE_FLAGS?.split(" ") ?? START_FLAGS), ...profile]);
try {
  const key = await apiKey(service.url);
  for (const concurrency of CONCURRENCY) {
    const direct = await streams(`${upstream.url}/v1beta/${PATH}`, { "x-vendor-api-key": "bench-upstream-key" }, concurrency);
    const gateway = await streams(`${service.url}/api/aimodel/v1beta/${PATH}`, { "x-goog-api-key": key }, concurrency);
    if (gateway.failures > 0) console.log(`failures: ${gateway.failures} ${gateway.failureSamples.join("; ")}`);
    console.log(
      `${concurrency} in flight: ${gateway.streams} streams; first event added p50 ${f(gateway.firstEvent.p50 - direct.firstEvent.p50)} ` +
        `p90 ${f(gateway.firstEvent.p90 - direct.firstEvent.p90)} p99 ${f(gateway.firstEvent.p99 - direct.firstEvent.p99)} ms ` +
        `(gateway ${f(gateway.firstEvent.p50)}/${f(gateway.firstEvent.p99)}/max ${f(gateway.firstEvent.max)}, direct ${f(direct.firstEvent.p50)}/${f(direct.firstEvent.p99)}); ` +
        `whole added p50 ${f(gateway.whole.p50 - direct.whole.p50)} p99 ${f(gateway.whole.p99 - direct.whole.p99)} ms; ` +
        `own (Server-Timing) p50 ${f(gateway.own?.p50 ?? NaN)} p99 ${f(gateway.own?.p99 ?? NaN)} max ${f(gateway.own?.max ?? NaN)} ms`,
    );
  }
} finally {
  await service.stop();
  await upstream.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
