/**
 * What the real-backend benchmarks share (bench/real-backends.ts,
 * bench/hot-account.ts): keep-alive HTTP clients, closed loops that time each
 * operation inside a measured window, and the CPU each process used in it.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { ADMIN_TOKEN } from "../test/support/harness.js";
import type { ServiceProcess } from "../test/support/processes.js";
import { RawHttpConnection, type RawReply } from "./raw-http-connection.js";

export const WARMUP_MS = Number(process.env.BENCH_WARMUP_S ?? 2) * 1000;
export const DURATION_MS = Number(process.env.BENCH_DURATION_S ?? 12) * 1000;
const MAX_OPS = Number(process.env.BENCH_MAX_OPS ?? 200_000);
const REQUEST_TIMEOUT_MS = 30_000;

// ---------------------------------------------------------------- HTTP client

export type Reply = RawReply;

/** A connection that reopens itself after a transport error, so one reset does not end a loop. */
export class Client {
  private connection: Promise<RawHttpConnection>;
  constructor(private readonly port: number) {
    this.connection = RawHttpConnection.open("127.0.0.1", port);
  }
  async request(bytes: Buffer): Promise<Reply> {
    const connection = await this.connection;
    try {
      return await connection.request(bytes, REQUEST_TIMEOUT_MS);
    } catch (error) {
      connection.close();
      this.connection = RawHttpConnection.open("127.0.0.1", this.port);
      throw error;
    }
  }
  async close(): Promise<void> {
    (await this.connection.catch(() => undefined))?.close();
  }
}

export function postBytes(url: string, path: string, apiKey: string, body: string): Buffer {
  const { host } = new URL(url);
  const payload = Buffer.from(body);
  const head = [
    `POST ${path} HTTP/1.1`, `host: ${host}`, "connection: keep-alive", `authorization: Bearer ${apiKey}`,
    "content-type: application/json", `content-length: ${payload.length}`,
  ].join("\r\n");
  return Buffer.concat([Buffer.from(head + "\r\n\r\n", "latin1"), payload]);
}

export const portOf = (url: string) => Number(new URL(url).port);

export async function json(url: string, init: RequestInit & { expect: number }): Promise<any> {
  const response = await fetch(url, init);
  const text = await response.text();
  if (response.status !== init.expect) throw new Error(`${init.method ?? "GET"} ${url} answered ${response.status}: ${text}`);
  return text ? JSON.parse(text) : undefined;
}

export interface Customer {
  readonly accountId: string;
  readonly apiKey: string;
}

export async function customer(apiUrl: string): Promise<Customer> {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" };
  const account = await json(`${apiUrl}/admin/v1/accounts`, {
    method: "POST", headers: admin, body: JSON.stringify({ name: "bench", balance: "1000000" }), expect: 201,
  });
  const key = await json(`${apiUrl}/admin/v1/accounts/${account.account_id}/keys`, {
    method: "POST", headers: admin, body: JSON.stringify({ models: ["*"] }), expect: 201,
  });
  return { accountId: account.account_id, apiKey: key.api_key };
}

// ---------------------------------------------------------------- CPU accounting

export const CLK_TCK = Number(sh("getconf", ["CLK_TCK"])) || 100;

/** CPU seconds a process has used so far (user + system), from /proc. */
export function procCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return NaN;
  }
}

/** Busy CPU seconds of the whole machine, from /proc/stat. */
export function machineBusySeconds(): number {
  const [, ...ticks] = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).map(Number);
  const idle = ticks[3]! + ticks[4]!; // idle + iowait
  return (ticks.slice(0, 8).reduce((a, b) => a + b, 0) - idle) / CLK_TCK;
}

export type CpuSnapshot = { wall: number; machine: number; self: number; procs: Map<string, number> };

export class CpuProbe {
  readonly pids = new Map<string, number>();
  snapshot(): CpuSnapshot {
    const procs = new Map<string, number>();
    for (const [name, pid] of this.pids) procs.set(name, procCpuSeconds(pid));
    const self = process.cpuUsage();
    return { wall: performance.now(), machine: machineBusySeconds(), self: (self.user + self.system) / 1e6, procs };
  }
  /** Cores used by each component between two snapshots; "other" is whatever else ran on the machine. */
  static between(a: CpuSnapshot, b: CpuSnapshot): Record<string, number> {
    const seconds = (b.wall - a.wall) / 1000;
    const out: Record<string, number> = { "bench client": (b.self - a.self) / seconds };
    let known = out["bench client"]!;
    for (const [name, start] of a.procs) {
      const used = (b.procs.get(name)! - start) / seconds;
      if (Number.isFinite(used)) {
        out[name] = used;
        known += used;
      }
    }
    out["machine total"] = (b.machine - a.machine) / seconds;
    out["other processes"] = Math.max(0, out["machine total"]! - known);
    return out;
  }
}

export const cpu = new CpuProbe();

// ---------------------------------------------------------------- closed loops

export interface LoopResult {
  readonly name: string;
  readonly concurrency: number;
  readonly measuredMs: number;
  readonly ok: number;
  readonly outcomes: Record<string, number>;
  /** Latencies of the successful operations, sorted (ms). */
  readonly latencies: Float64Array;
  /** Successful operations completed in each second of the measured window. */
  readonly perSecond: number[];
  readonly errorSamples: string[];
  readonly cores: Record<string, number>;
  readonly window: { start: number; end: number };
}

/**
 * `concurrency` closed loops of `op` (each starts the next operation when the
 * previous one ends) for warm-up + duration, bounded by MAX_OPS. Only
 * operations that both started and ended inside the measured window count.
 * `op` returns an outcome label; "ok" is success.
 */
export async function closedLoop(
  name: string,
  concurrency: number,
  op: (loop: number) => Promise<string>,
  warmupMs = WARMUP_MS,
  durationMs = DURATION_MS,
): Promise<LoopResult> {
  process.stderr.write(`· ${name} … `);
  const start = performance.now() + warmupMs;
  const end = start + durationMs;
  let issued = 0;
  const outcomes: Record<string, number> = {};
  const latencies: number[] = [];
  const perSecond = Array.from({ length: Math.ceil(durationMs / 1000) }, () => 0);
  const errorSamples: string[] = [];
  let cpuStart: CpuSnapshot | undefined;
  let cpuEnd: CpuSnapshot | undefined;
  const t1 = setTimeout(() => (cpuStart = cpu.snapshot()), warmupMs);
  const t2 = setTimeout(() => (cpuEnd = cpu.snapshot()), warmupMs + durationMs);
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      while (performance.now() < end && issued < MAX_OPS) {
        issued++;
        const began = performance.now();
        let outcome: string;
        try {
          outcome = await op(loop);
        } catch (error) {
          outcome = "exception";
          if (errorSamples.length < 5) errorSamples.push((error as Error).message.slice(0, 300));
        }
        const finished = performance.now();
        if (began < start || finished > end) continue;
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        if (outcome === "ok") {
          latencies.push(finished - began);
          perSecond[Math.min(perSecond.length - 1, Math.floor((finished - start) / 1000))]!++;
        } else if (errorSamples.length < 5 && outcome !== "exception") {
          errorSamples.push(outcome);
        }
      }
    }),
  );
  clearTimeout(t1);
  clearTimeout(t2);
  cpuStart ??= cpu.snapshot();
  cpuEnd ??= cpu.snapshot();
  const measuredMs = Math.min(end, performance.now()) - start;
  const result: LoopResult = {
    name, concurrency, measuredMs, ok: outcomes.ok ?? 0, outcomes, latencies: Float64Array.from(latencies).sort(), perSecond, errorSamples,
    cores: CpuProbe.between(cpuStart, cpuEnd), window: { start, end },
  };
  process.stderr.write(`${fmt(rate(result), 0)}/s, p50 ${fmt(pct(result.latencies, 50), 1)} ms, p99 ${fmt(pct(result.latencies, 99), 1)} ms, ${JSON.stringify(outcomes)}\n`);
  return result;
}

export function pct(sorted: Float64Array | number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const rate = (r: LoopResult) => (r.ok / r.measuredMs) * 1000;
export const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "–");

/** POST /api/v1/generations in closed loops; loop i uses clients[i] with keys[i]. */
export async function postLoop(name: string, targets: { url: string; apiKey: string }[], body: string, durationMs = DURATION_MS): Promise<LoopResult> {
  const clients = targets.map((t) => new Client(portOf(t.url)));
  const requests = targets.map((t) => postBytes(t.url, "/api/v1/generations", t.apiKey, body));
  try {
    return await closedLoop(name, targets.length, async (i) => {
      const reply = await clients[i]!.request(requests[i]!);
      return reply.status === 202 ? "ok" : `HTTP ${reply.status}: ${reply.body.toString("utf8").slice(0, 200)}`;
    }, WARMUP_MS, durationMs);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}

// ---------------------------------------------------------------- report helpers

export function sh(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { encoding: "utf8" }).trim();
  } catch {
    return "(unavailable)";
  }
}

export function coresLine(cores: Record<string, number>): string {
  return Object.entries(cores).map(([k, v]) => `${k} ${fmt(v, 2)}`).join(", ");
}

export function loopRow(r: LoopResult, extra = ""): string {
  const other = Object.entries(r.outcomes).filter(([k]) => k !== "ok");
  return (
    `| ${r.name} | ${r.concurrency} | ${fmt(rate(r), 0)} | ${fmt(pct(r.latencies, 50))} | ${fmt(pct(r.latencies, 99))} | ${fmt(r.latencies.at(-1) ?? NaN)} | ` +
    `${r.ok} | ${other.length ? other.map(([k, v]) => `${v}× ${k.replace(/\|/g, "/")}`).join("; ") : "0"} |${extra}`
  );
}

export const LOOP_HEADER = [
  "| scenario | in flight | ok/s | p50 ms | p99 ms | max ms | ok | not ok |",
  "|---|---:|---:|---:|---:|---:|---:|---|",
];

/** Lines a process printed besides its start-up and shutdown banners: errors, warnings, stack traces. */
export function unexpectedOutput(p: ServiceProcess): string[] {
  return p
    .output()
    .replace(/No accounts yet\.[\s\S]*?flash-lite-image"\]\}'\n/, "")
    .split("\n")
    // Warnings and errors of the JSON log (level 40 and above), and anything that is not a log line (a stack trace).
    .filter((line) => line.trim() && !(line.startsWith("{") && /"level":(10|20|30),/.test(line)));
}

