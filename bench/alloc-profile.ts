/**
 * Where the gateway's garbage comes from, per stream (issue 13): runs the
 * service in this process under V8's sampling heap profiler, counting objects
 * the collector has already freed too, while a stream client (a process of its
 * own) streams through it from the bench upstream. Prints the bytes allocated
 * per stream, by allocating function and by the gateway's frame nearest to it.
 *
 *   npm run build && node dist/bench/alloc-profile.js [concurrency=1] [seconds=5]
 *
 * ALLOC_UNARY=1: non-streamed generateContent requests (bench/peers/request-client.ts) instead of streams, the
 * upstream as bench:peers runs it; ALLOC_LOG_LEVEL (warn) the service's LOG_LEVEL.
 *
 * (or `tsx bench/alloc-profile.ts`, whose frames then carry no line numbers)
 */
import { spawn, execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { Session } from "node:inspector/promises";
import os from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { loadConfig } from "../src/config/config.js";
import { startService } from "../src/runtime/start-service.js";

const concurrency = Number(process.argv[2] ?? 1);
const seconds = Number(process.argv[3] ?? 5);
/** The repository: this file runs from bench/ (tsx) or compiled from dist/bench/ (`npm run build`, for line numbers). */
const ROOT = new URL(import.meta.url.includes("/dist/bench/") ? "../.." : "..", import.meta.url).pathname;

function startChild(kind: string, env: Record<string, string>): Promise<{ url: string; kill(): void }> {
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "bench/servers.ts"), kind], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve) => {
    createInterface({ input: child.stdout! }).once("line", (line) => resolve({ url: JSON.parse(line).url, kill: () => child.kill() }));
  });
}

const unary = process.env.ALLOC_UNARY === "1";
const upstream = await startChild("upstream", { BENCH_UPSTREAM_GAP_MS: unary ? "0" : concurrency === 1 ? "2" : "25", BENCH_UPSTREAM_ANSWER_MS: "20", BENCH_UPSTREAM_FIRST_MS: "20" });
const service = await startService(loadConfig({
  ...process.env, HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", METRICS_PORT: "0", ADMIN_TOKEN: "alloc-profile-admin-token-0123456789", DATA_DIR: mkdtempSync(join(os.tmpdir(), "alloc-")),
  SIMULATED_LATENCY_MS: "0", LOG_LEVEL: process.env.ALLOC_LOG_LEVEL ?? "warn", VENDOR_BASE_URL: upstream.url, VENDOR_API_KEY: "k",
}));
const admin = { authorization: "Bearer alloc-profile-admin-token-0123456789", "content-type": "application/json" };
const account = await (await fetch(`${service.httpUrl}/admin/v1/accounts`, { method: "POST", headers: admin, body: JSON.stringify({ name: "a", balance: "100000000" }) })).json() as { account_id: string };
const key = await (await fetch(`${service.httpUrl}/admin/v1/accounts/${account.account_id}/keys`, { method: "POST", headers: admin, body: JSON.stringify({ models: ["*"] }) })).json() as { api_key: string };

const spec = (durationMs: number) => JSON.stringify({
  url: `${service.httpUrl}/api/aimodel/v1beta/models/aimodel-3.5-flash:${unary ? "generateContent" : "streamGenerateContent?alt=sse"}`,
  headers: { "x-goog-api-key": key.api_key }, body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "Say something short." }] }] }),
  concurrency, durationMs, warmupMs: 0, expect: "", cpuPids: [],
});
/** Streams (or requests, ALLOC_UNARY) completed. */
const client = (durationMs: number) => new Promise<{ streams: number }>((resolve, reject) =>
  execFile(process.execPath, ["--import", "tsx", join(ROOT, unary ? "bench/peers/request-client.ts" : "bench/stream-client.ts"), spec(durationMs)], (error, stdout) => {
    if (error) return reject(error);
    const result = JSON.parse(stdout) as { streams?: number; ok?: number };
    resolve({ streams: result.streams ?? result.ok ?? 0 });
  }));

await client(2000); // warm-up
if (process.env.ALLOC_PROFILE === "0") {
  // Only the load (e.g. under --trace-gc, without the profiler's own cost).
  const { streams } = await client(seconds * 1000);
  console.log(`${streams} streams`);
  upstream.kill();
  await service.close({ drain: false });
  process.exit(0);
}
const session = new Session();
session.connect();
// ALLOC_LIVE=1: only what is still alive at the end, after a full collection (run with --expose-gc): what the load retains.
const live = process.env.ALLOC_LIVE === "1";
await session.post("HeapProfiler.startSampling", { samplingInterval: 256, includeObjectsCollectedByMajorGC: !live, includeObjectsCollectedByMinorGC: !live });
const { streams } = await client(seconds * 1000);
if (live) (globalThis as { gc?: () => void }).gc?.();
const { profile } = await session.post("HeapProfiler.stopSampling");
session.disconnect();

interface Node { callFrame: { functionName: string; url: string; lineNumber: number }; selfSize: number; children: Node[] }
const byFunction = new Map<string, number>();
const byOurs = new Map<string, number>();
let total = 0;
const where = (frame: Node["callFrame"]) => `${frame.functionName || "(anonymous)"} ${frame.url.replace(/^.*\/(node_modules\/|src\/|gen\/)/, "$1")}:${frame.lineNumber + 1}`;
const ours = (frame: Node["callFrame"]) => frame.url.includes("/src/") && !frame.url.includes("node_modules");
(function walk(node: Node, nearest: string) {
  const here = ours(node.callFrame) ? where(node.callFrame) : nearest;
  if (node.selfSize > 0) {
    total += node.selfSize;
    byFunction.set(where(node.callFrame), (byFunction.get(where(node.callFrame)) ?? 0) + node.selfSize);
    byOurs.set(here, (byOurs.get(here) ?? 0) + node.selfSize);
  }
  for (const child of node.children) walk(child, here);
})(profile.head as unknown as Node, "(outside src)");

// ALLOC_STACKS=<text>: also the call stacks (innermost first) that allocate in a function whose name or file contains it.
const stacksOf = process.env.ALLOC_STACKS;
const stacks = new Map<string, number>();
if (stacksOf) {
  (function walk(node: Node, path: string[]) {
    const here = [where(node.callFrame), ...path];
    if (node.selfSize > 0 && here[0]!.includes(stacksOf)) stacks.set(here.slice(0, 12).join("\n      < "), (stacks.get(here.slice(0, 12).join("\n      < ")) ?? 0) + node.selfSize);
    for (const child of node.children) walk(child, here);
  })(profile.head as unknown as Node, []);
}
const top = (map: Map<string, number>, n: number) => [...map].sort((a, b) => b[1] - a[1]).slice(0, n)
  .map(([name, bytes]) => `${String(Math.round(bytes / streams)).padStart(8)} B  ${name}`).join("\n");
console.log(`${streams} streams, ${Math.round(total / streams)} bytes allocated per stream (sampled)\n`);
console.log(`by allocating function:\n${top(byFunction, 40)}\n`);
console.log(`by the nearest frame in src/:\n${top(byOurs, 40)}`);
if (stacksOf) console.log(`\nstacks allocating in ${stacksOf}:\n${top(stacks, 10)}`);
upstream.kill();
await service.close({ drain: false });
process.exit(0);
