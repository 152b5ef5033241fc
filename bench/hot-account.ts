/**
 * One account at scale (issue 14), on the real backends: Cassandra and Kafka
 * from infra/ (`bash infra/up.sh`), every writer and service a process of its own.
 *
 *   npx tsx bench/hot-account.ts        # about 4 minutes
 *
 * 1. The ledger alone: one account, reserve-and-release pairs from 64 callers
 *    split over 1, 2 and 4 writer processes (bench/ledger-writer.ts), against a
 *    bare single-row compare-and-set loop (`UPDATE … IF v = ?`, the same driver
 *    and Cassandra) with the same callers and processes, in the same run.
 * 2. Depth: the same pairs (one writer process) on an account with
 *    BENCH_DEPTH_HOLDS (10,000) open holds, against an empty account.
 * 3. Through the service: 64 clients creating image jobs (no worker) for
 *    BENCH_DURATION_S (15) through 1, 2 and 4 API processes, all on one account,
 *    against the same load spread over 64 accounts.
 *
 * Knobs: BENCH_ONLY (ledger,depth,service), BENCH_LEDGER_S (8), BENCH_CALLERS (64),
 * BENCH_PROCESSES (1,2,4), BENCH_OUT (also write the report there).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import { join } from "node:path";
import { CassandraLedger } from "../src/adapters/cassandra/ledger/cassandra-ledger.js";
import { openSession, type CassandraClient } from "../src/adapters/cassandra/cassandra-session.js";
import { dropRealBackend, realBackendEnv } from "../test/support/harness.js";
import { startProcess, type ServiceProcess } from "../test/support/processes.js";
import { customer, fmt, pct, postLoop, rate, sh, WARMUP_MS, type LoopResult } from "./load-kit.js";

const ONLY = new Set((process.env.BENCH_ONLY ?? "ledger,depth,service").split(","));
const LEDGER_MS = Number(process.env.BENCH_LEDGER_S ?? 8) * 1000;
const CALLERS = Number(process.env.BENCH_CALLERS ?? 64);
const PROCESSES = (process.env.BENCH_PROCESSES ?? "1,2,4").split(",").map(Number);
const DEPTH_HOLDS = Number(process.env.BENCH_DEPTH_HOLDS ?? 10_000);
const SERVICE_MS = Number(process.env.BENCH_DURATION_S ?? 15) * 1000;
const CASSANDRA = process.env.CASSANDRA_CONTACT_POINTS || "127.0.0.1:9042";
const AMOUNT = 39_000_000_000n;
const ROOT = new URL("..", import.meta.url).pathname;

interface WriterResult {
  readonly ok: number;
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly notOk: Record<string, number>;
  readonly errors: string[];
  /** Cores the writer processes used in all, and the whole machine (the writers' mean view), in the window. */
  readonly cores: { writers: number; machine: number };
  /** The rounds the writers committed in the window (lost ones included): how many, and their mean operations and time. */
  readonly rounds: { perSecond: number; operations: number; ms: number };
}

/** Runs `processes` writer processes of `mode` on one account together; merges what they measured. */
/** `accountId`: the one account all processes load, or one per process (the i-th for the i-th). */
async function writers(mode: "ledger" | "cas", keyspace: string, accountId: string | readonly string[], processes: number): Promise<WriterResult> {
  let ready = 0;
  const children: ChildProcess[] = [];
  const runs = Array.from({ length: processes }, (_, i) => {
    const callers = Math.floor(CALLERS / processes) + (i < CALLERS % processes ? 1 : 0);
    const child = spawn(process.execPath, ["--import", "tsx", "bench/ledger-writer.ts"], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "", ...(process.env.BENCH_MAX_OPS ? { BENCH_MAX_OPS: process.env.BENCH_MAX_OPS } : {}), WRITER_MODE: mode, CASSANDRA_CONTACT_POINTS: CASSANDRA, CASSANDRA_KEYSPACE: keyspace, ACCOUNT_ID: typeof accountId === "string" ? accountId : accountId[i]!,
        CALLERS: String(callers), WARMUP_MS: String(WARMUP_MS), DURATION_MS: String(LEDGER_MS),
      },
      stdio: ["pipe", "pipe", "inherit"],
    });
    children.push(child);
    let out = "";
    child.stdout!.on("data", (chunk) => {
      out += chunk;
      if (!out.startsWith("ready\n") || out.length - chunk.length >= "ready\n".length) return;
      // Every writer is ready (tsx loaded, a session open: seconds beside a busy Cassandra): the warm-up begins together.
      if (++ready === processes) {
        const startAt = Date.now() + 200 + WARMUP_MS;
        for (const each of children) each.stdin!.end(`${startAt}\n`);
      }
    });
    return new Promise<{
      outcomes: Record<string, number>; latencies: number[]; errors: string[]; windowStart: number; cores: { self: number; machine: number };
      rounds: { count: number; operations: number; seconds: number };
    }>((resolve, reject) => {
      child.once("close", (code) => (code === 0 ? resolve(JSON.parse(out.trim().split("\n").at(-1)!)) : reject(new Error(`writer exited ${code}: ${out}`))));
    });
  });
  const results = await Promise.all(runs);
  // The processes' measured windows must coincide: one that started late would measure a quieter account.
  const skew = Math.max(...results.map((r) => r.windowStart)) - Math.min(...results.map((r) => r.windowStart));
  // Up to 2 % of the window: on two busy cores a process's timer fires some tens of ms late (83 ms seen).
  if (skew > LEDGER_MS / 50) throw new Error(`the writer processes' windows began ${skew} ms apart: raise the start-up allowance`);
  const latencies = Float64Array.from(results.flatMap((r) => r.latencies)).sort();
  const notOk: Record<string, number> = {};
  for (const r of results) for (const [k, v] of Object.entries(r.outcomes)) if (k !== "ok") notOk[k] = (notOk[k] ?? 0) + v;
  return {
    ok: latencies.length, perSecond: (latencies.length / LEDGER_MS) * 1000, p50: pct(latencies, 50), p99: pct(latencies, 99), notOk,
    errors: results.flatMap((r) => r.errors),
    cores: {
      writers: results.reduce((sum, r) => sum + r.cores.self, 0),
      machine: results.reduce((sum, r) => sum + r.cores.machine, 0) / results.length,
    },
    rounds: roundsOf(results.map((r) => r.rounds)),
  };
}

function roundsOf(each: readonly { count: number; operations: number; seconds: number }[]): WriterResult["rounds"] {
  const count = each.reduce((sum, r) => sum + r.count, 0);
  const per = (value: number) => (count === 0 ? 0 : value / count);
  return {
    perSecond: (count / LEDGER_MS) * 1000,
    operations: per(each.reduce((sum, r) => sum + r.operations, 0)),
    ms: per(each.reduce((sum, r) => sum + r.seconds, 0) * 1000),
  };
}

const writerCell = (r: WriterResult) =>
  `${fmt(r.perSecond, 0)}/s, p50 ${fmt(r.p50)} / p99 ${fmt(r.p99)} ms; cores: writers ${fmt(r.cores.writers, 2)}, machine ${fmt(r.cores.machine, 2)}` +
  (r.rounds.perSecond > 0 ? `; rounds ${fmt(r.rounds.perSecond, 0)}/s of ${fmt(r.rounds.operations, 1)} operations, ${fmt(r.rounds.ms)} ms` : "") +
  (Object.keys(r.notOk).length ? ` (not ok: ${JSON.stringify(r.notOk)})` : "");

/** Takes `count` holds on the account, a few hundred at a time (the ledger groups what arrives together). */
async function seedHolds(ledger: CassandraLedger, accountId: string, count: number): Promise<void> {
  for (let done = 0; done < count; done += 500) {
    const outcomes = await Promise.all(Array.from({ length: Math.min(500, count - done) }, () => ledger.reserve(accountId, `job:${randomUUID()}`, AMOUNT)));
    if (outcomes.some((o) => o !== "reserved")) throw new Error(`seeding refused: ${outcomes.find((o) => o !== "reserved")}`);
  }
}

async function main(): Promise<void> {
  const began = Date.now();
  const report: string[] = [];
  const backend = realBackendEnv();
  const keyspace = backend.CASSANDRA_KEYSPACE!;
  let session: CassandraClient | undefined;
  const services: ServiceProcess[] = [];
  const serviceBackends: Record<string, string>[] = [];
  const dataDir = await mkdtemp(join(os.tmpdir(), "gen-bench-hot-"));
  try {
    session = await openSession({ contactPoints: CASSANDRA.split(","), keyspace, localDataCenter: "datacenter1", replication: { strategy: "SimpleStrategy", factor: 1 } });
    const ledger = new CassandraLedger(session);
    report.push(
      `Commit ${sh("git", ["rev-parse", "--short", "HEAD"])}; ${new Date().toISOString()}; \`npx tsx bench/hot-account.ts\`.`,
      `Machine: ${os.cpus()[0]?.model ?? "?"}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; load average at start ${os.loadavg().map((l) => l.toFixed(2)).join(" / ")}.`,
      "",
    );

    if (ONLY.has("ledger")) {
      await session.execute("CREATE TABLE IF NOT EXISTS bench_cas (id text PRIMARY KEY, v bigint)");
      report.push(
        `### The ledger alone: one account, ${CALLERS} callers, ${LEDGER_MS / 1000} s per run`,
        "",
        "| writer processes | bare CAS loop (`UPDATE … IF`), updates | ledger, reserve-and-release pairs | pairs ÷ bare updates | each process its own account (the ceiling of any split of one account's money) | target |",
        "|---:|---|---|---:|---|---|",
      );
      for (const processes of PROCESSES) {
        const row = `cas-${randomUUID()}`;
        await session.execute("INSERT INTO bench_cas (id, v) VALUES (?, 0)", [row]);
        process.stderr.write(`· bare CAS, ${processes} process(es) … `);
        const bare = await writers("cas", keyspace, row, processes);
        process.stderr.write(`${writerCell(bare)}\n· ledger pairs, ${processes} process(es) … `);
        const accountId = `hot-${randomUUID()}`;
        await ledger.createAccount(accountId, "hot", 10n ** 30n);
        const pairs = await writers("ledger", keyspace, accountId, processes);
        process.stderr.write(`${writerCell(pairs)}\n· pairs, each process its own account, ${processes} process(es) … `);
        // What escrow (slices of one account's money, each committed by one writer) could reach at best: no two
        // processes ever write one partition, so nothing conflicts and nothing is forwarded.
        const own = Array.from({ length: processes }, () => `hot-own-${randomUUID()}`);
        for (const id of own) await ledger.createAccount(id, "hot", 10n ** 30n);
        const split = await writers("ledger", keyspace, own, processes);
        process.stderr.write(`${writerCell(split)}\n`);
        report.push(
          `| ${processes} | ${writerCell(bare)} | ${writerCell(pairs)} | ${fmt(pairs.perSecond / bare.perSecond, 2)}× | ${writerCell(split)} | ≥ 10×, never falling as writers are added |`,
        );
        for (const error of [...bare.errors, ...pairs.errors, ...split.errors].slice(0, 3)) report.push(`|  | error: ${error.replace(/\|/g, "/")} | | | | |`);
      }
      report.push("");
    }

    if (ONLY.has("depth")) {
      const empty = `depth-empty-${randomUUID()}`;
      const deep = `depth-deep-${randomUUID()}`;
      await ledger.createAccount(empty, "empty", 10n ** 30n);
      await ledger.createAccount(deep, "deep", 10n ** 30n);
      process.stderr.write(`· seeding ${DEPTH_HOLDS} open holds … `);
      const seeded = Date.now();
      await seedHolds(ledger, deep, DEPTH_HOLDS);
      const seedSeconds = (Date.now() - seeded) / 1000;
      process.stderr.write(`${seedSeconds.toFixed(1)} s\n· pairs on the empty account … `);
      const onEmpty = await writers("ledger", keyspace, empty, 1);
      process.stderr.write(`${writerCell(onEmpty)}\n· pairs on the deep account … `);
      const onDeep = await writers("ledger", keyspace, deep, 1);
      process.stderr.write(`${writerCell(onDeep)}\n`);
      const held = (await ledger.balance(deep))?.reserved ?? 0n;
      report.push(
        `### Depth: reserve-and-release pairs, ${CALLERS} callers in one writer process, ${LEDGER_MS / 1000} s per run`,
        "",
        "| account | pairs | throughput vs empty | p99 vs empty | target |",
        "|---|---|---:|---:|---|",
        `| empty | ${writerCell(onEmpty)} | – | – | |`,
        `| ${DEPTH_HOLDS} open holds (seeded in ${seedSeconds.toFixed(1)} s; ${held / AMOUNT} open after the run) | ${writerCell(onDeep)} | ${fmt(onDeep.perSecond / onEmpty.perSecond, 2)}× | ${fmt(onDeep.p99 / onEmpty.p99, 2)}× | within 20 % of the empty account's |`,
        "",
      );
    }

    if (ONLY.has("service")) {
      report.push(
        `### Through the service: ${CALLERS} clients creating image jobs, no worker, ${SERVICE_MS / 1000} s per run`,
        "",
        "| API processes | spread over 64 accounts | one account | one ÷ spread | target |",
        "|---:|---|---|---:|---|",
      );
      const secret = randomBytes(32).toString("hex");
      const body = JSON.stringify({ model: "aimodel-2.5-flash-image", prompt: "a lighthouse at dusk, oil painting" });
      const cell = (r: LoopResult) => `${fmt(rate(r), 0)}/s, p50 ${fmt(pct(r.latencies, 50))} / p99 ${fmt(pct(r.latencies, 99))} ms${r.ok < Object.values(r.outcomes).reduce((a, b) => a + b, 0) ? ` (${JSON.stringify(r.outcomes)})` : ""}`;
      for (const count of PROCESSES) {
        const serviceBackend = { ...realBackendEnv(), KAFKA_PARTITIONS: "6" };
        serviceBackends.push(serviceBackend);
        const env = {
          ...serviceBackend, ROLE: "api", DATA_DIR: dataDir, URL_SIGNING_SECRET: secret, MAX_QUEUED_JOBS_PER_ACCOUNT: "1000000", SHUTDOWN_GRACE: "2s",
        };
        process.stderr.write(`starting ${count} API process(es) …\n`);
        const first = await startProcess(env, 90_000); // the first creates the keyspace and topics
        const apis = [first, ...(await Promise.all(Array.from({ length: count - 1 }, () => startProcess(env, 90_000))))];
        services.push(...apis);
        const spreadAccounts = await Promise.all(Array.from({ length: CALLERS }, () => customer(first.url)));
        const hot = await customer(first.url);
        const runSpread = () => postLoop(
          `${count} API process(es), ${CALLERS} accounts`, spreadAccounts.map((c, i) => ({ url: apis[i % count]!.url, apiKey: c.apiKey })), body, SERVICE_MS,
        );
        const runOne = () => postLoop(
          `${count} API process(es), one account`, Array.from({ length: CALLERS }, (_, i) => ({ url: apis[i % count]!.url, apiKey: hot.apiKey })), body, SERVICE_MS,
        );
        // Which load goes first alternates with the process count: the second runs on a fuller store.
        let spread: LoopResult;
        let one: LoopResult;
        if (PROCESSES.indexOf(count) % 2 === 0) {
          spread = await runSpread();
          one = await runOne();
        } else {
          one = await runOne();
          spread = await runSpread();
        }
        report.push(`| ${count} | ${cell(spread)} | ${cell(one)} | ${fmt(rate(one) / rate(spread), 2)}× | ≥ 0.9× |`);
        await Promise.all(apis.map((p) => p.stop("SIGTERM").catch(() => undefined)));
        services.length = 0;
      }
      report.push("");
    }
    report.push(`Took ${((Date.now() - began) / 1000).toFixed(0)} s; load average at the end ${os.loadavg().map((l) => l.toFixed(2)).join(" / ")}.`);
    const text = report.join("\n");
    process.stdout.write(`${text}\n`);
    if (process.env.BENCH_OUT) await writeFile(process.env.BENCH_OUT, `${text}\n`);
  } finally {
    await Promise.all(services.map((p) => p.stop("SIGTERM").catch(() => undefined)));
    await session?.shutdown();
    for (const b of [backend, ...serviceBackends]) await dropRealBackend(b).catch(() => undefined);
    await rm(dataDir, { recursive: true, force: true });
  }
}

await main();
