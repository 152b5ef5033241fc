/**
 * Throughput and latency on the real backends (issue 3's benchmark): job
 * creation, create-to-done, and reservations on one hot account, against
 * Cassandra and Kafka from infra/ and service processes started the way an
 * operator starts them (`node --import tsx src/main.ts` with a ROLE).
 *
 *   bash infra/up.sh                      # if Kafka (127.0.0.1:9092) and Cassandra (127.0.0.1:9042) are not running
 *   npx tsx bench/real-backends.ts
 *
 * Knobs (environment): BENCH_DURATION_S (12) and BENCH_WARMUP_S (2) per HTTP
 * scenario, BENCH_CONNECTIONS (32), BENCH_LEDGER_S (5) per in-process ledger
 * run, BENCH_LEDGER_CALLERS (64), BENCH_OUT (also write the report there).
 *
 * Every scenario gets a fresh keyspace and topic prefix (realBackendEnv()),
 * dropped at the end together with the processes this script started. The load
 * comes from closed loops on raw keep-alive sockets in this process: with five
 * service processes, Cassandra and Kafka sharing the cores, a worker thread
 * would not buy the client a core of its own, and the CPU table shows what
 * the client itself cost.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import cassandra from "cassandra-driver";
import kafkajs from "kafkajs";
import { CassandraLedger } from "../src/adapters/cassandra/ledger/cassandra-ledger.js";
import { openSession, type CassandraClient } from "../src/adapters/cassandra/cassandra-session.js";
import { dropRealBackend, realBackendEnv } from "../test/support/harness.js";
import { startProcess, type ServiceProcess } from "../test/support/processes.js";
import {
  Client, closedLoop, coresLine, cpu, customer, DURATION_MS, fmt, json, LOOP_HEADER, loopRow, pct, portOf, postBytes, postLoop, rate, sh, unexpectedOutput,
  WARMUP_MS, type LoopResult,
} from "./load-kit.js";

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const LEDGER_MS = Number(process.env.BENCH_LEDGER_S ?? 5) * 1000;
const LEDGER_CALLERS = Number(process.env.BENCH_LEDGER_CALLERS ?? 64);
const WEBHOOK_WAIT_MS = 30_000;
const WORKER_CONCURRENCY = 16;
const MODEL = "aimodel-2.5-flash-image";
const PRICE_PICO = 39_000_000_000n; // 0.039, the model's 1K price
const PROMPT = "a lighthouse at dusk, oil painting";
const CASSANDRA = process.env.CASSANDRA_CONTACT_POINTS || "127.0.0.1:9042";
const KAFKA = process.env.KAFKA_BROKERS || "127.0.0.1:9092";

// ---------------------------------------------------------------- webhook receiver

interface Arrival {
  readonly at: number;
  readonly wallAt: number;
  readonly status: string;
}

/** Records when each job's webhook arrives; create-to-done is measured to that moment. */
async function webhookReceiver() {
  const arrivals = new Map<string, Arrival>();
  const waiters = new Map<string, (arrival: Arrival) => void>();
  let deliveries = 0;
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const at = performance.now();
      const wallAt = Date.now();
      response.writeHead(204).end();
      deliveries++;
      try {
        const payload = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { job_id: string; status: string };
        const arrival = { at, wallAt, status: payload.status };
        if (!arrivals.has(payload.job_id)) arrivals.set(payload.job_id, arrival);
        waiters.get(payload.job_id)?.(arrival);
        waiters.delete(payload.job_id);
      } catch {
        // counted in deliveries; an unparsable payload shows up as a job that never arrived
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    arrivals,
    deliveries: () => deliveries,
    wait(jobId: string): Promise<Arrival | undefined> {
      const known = arrivals.get(jobId);
      if (known) return Promise.resolve(known);
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiters.delete(jobId);
          resolve(undefined);
        }, WEBHOOK_WAIT_MS);
        waiters.set(jobId, (arrival) => {
          clearTimeout(timer);
          resolve(arrival);
        });
      });
    },
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

// ---------------------------------------------------------------- Cassandra inspection

/** What one account row says after a run: Paxos rounds applied (version) and holds still open. */
async function accountRows(keyspace: string, accountIds: string[]): Promise<{ rounds: bigint; holds: number }> {
  const client = new cassandra.Client({ contactPoints: CASSANDRA.split(","), localDataCenter: "datacenter1", encoding: { useBigIntAsLong: true } });
  try {
    let rounds = 0n;
    let holds = 0;
    for (const id of accountIds) {
      const row = (await client.execute(`SELECT version, holds FROM ${keyspace}.accounts WHERE account_id = ?`, [id], { prepare: true })).first();
      rounds += (row?.version as bigint | undefined) ?? 0n;
      holds += Object.keys((row?.holds as Record<string, unknown> | null) ?? {}).length;
    }
    return { rounds, holds };
  } finally {
    await client.shutdown();
  }
}

async function cassandraVersion(): Promise<string> {
  const client = new cassandra.Client({ contactPoints: CASSANDRA.split(","), localDataCenter: "datacenter1" });
  try {
    return String((await client.execute("SELECT release_version FROM system.local")).first()?.release_version ?? "?");
  } catch (error) {
    return `unknown (${(error as Error).message})`;
  } finally {
    await client.shutdown();
  }
}

// ---------------------------------------------------------------- in-process ledger

interface LedgerStats {
  reads: number;
  readMs: number;
  casAttempts: number;
  casApplied: number;
  casMs: number;
  ambiguous: number;
  /** For every applied round: when, the version it wrote, and the row's last_ops after it. */
  applied: { at: number; version: bigint; lastOps: string[] }[];
  /** Ledger operations (reserve or release) that returned, warm-up included. */
  operations: number;
}

const newLedgerStats = (): LedgerStats => ({ reads: 0, readMs: 0, casAttempts: 0, casApplied: 0, casMs: 0, ambiguous: 0, applied: [], operations: 0 });

/**
 * The ledger's own client, observed: counts and times its serial reads and
 * `UPDATE … IF version = ?` rounds, and records what each applied round wrote,
 * so batch sizes and lost rounds are measured rather than inferred.
 */
function observed(client: CassandraClient, stats: LedgerStats): CassandraClient {
  return new Proxy(client, {
    get(target, property) {
      if (property !== "execute") {
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      }
      return async (query: string, params?: cassandra.ArrayOrObject, options?: cassandra.QueryOptions) => {
        const began = performance.now();
        const isCas = query.startsWith("UPDATE accounts");
        const isRead = query.startsWith("SELECT balance, reserved, holds");
        try {
          const result = await target.execute(query, params, options);
          const ms = performance.now() - began;
          if (isRead) {
            stats.reads++;
            stats.readMs += ms;
          }
          if (isCas) {
            stats.casAttempts++;
            stats.casMs += ms;
            if (result.wasApplied()) {
              stats.casApplied++;
              const values = params as unknown[];
              stats.applied.push({ at: performance.now(), version: values[3] as bigint, lastOps: values[4] as string[] });
            }
          }
          return result;
        } catch (error) {
          if (isCas) {
            stats.casAttempts++;
            stats.ambiguous++;
          }
          throw error;
        }
      };
    },
  });
}

interface LedgerRun {
  readonly loop: LoopResult;
  readonly instances: number;
  readonly stats: LedgerStats;
  /** Operations per applied round, from consecutive rounds' last_ops. */
  readonly batch: { mean: number; p50: number; max: number; ones: number };
  readonly roundsPerSecond: number;
  readonly holdsAtEnd: number;
  readonly mode: string;
}

async function ledgerRun(sessions: CassandraClient[], instances: number, callers: number, mode: "reserve" | "reserve+release"): Promise<LedgerRun> {
  const accountId = `hot-${randomUUID()}`;
  await new CassandraLedger(sessions[0]!).createAccount(accountId, "hot", 10n ** 30n);
  const stats = newLedgerStats();
  const ledgers = Array.from({ length: instances }, (_, i) => new CassandraLedger(observed(sessions[i]!, stats)));
  const loop = await closedLoop(
    `ledger: ${mode}, ${instances} instance(s) × ${callers / instances} caller(s), one account`,
    callers,
    async (i) => {
      const ledger = ledgers[i % instances]!;
      const id = `job:${randomUUID()}`;
      const outcome = await ledger.reserve(accountId, id, PRICE_PICO);
      stats.operations++;
      if (mode === "reserve+release" && outcome === "reserved") {
        await ledger.release(accountId, id);
        stats.operations++;
      }
      return outcome === "reserved" ? "ok" : typeof outcome === "string" ? outcome : "key_limit";
    },
    1000,
    LEDGER_MS,
  );
  // A round writes last_ops = [its own operation ids, ...the previous round's last_ops], so the
  // position of the previous round's newest id is the number of operations this round applied.
  const byVersion = [...stats.applied].sort((a, b) => (a.version < b.version ? -1 : 1));
  const sizes: number[] = [];
  for (let i = 1; i < byVersion.length; i++) {
    const [previous, current] = [byVersion[i - 1]!, byVersion[i]!];
    if (current.version !== previous.version + 1n || previous.lastOps.length === 0) continue;
    const size = current.lastOps.indexOf(previous.lastOps[0]!);
    if (size > 0) sizes.push(size);
  }
  sizes.sort((a, b) => a - b);
  const batch = {
    mean: sizes.reduce((a, b) => a + b, 0) / sizes.length,
    p50: pct(sizes, 50),
    max: sizes.at(-1) ?? NaN,
    ones: sizes.filter((s) => s === 1).length / sizes.length,
  };
  const roundsPerSecond = (stats.applied.filter((a) => a.at >= loop.window.start && a.at <= loop.window.end).length / loop.measuredMs) * 1000;
  const holdsAtEnd = Number(((await new CassandraLedger(sessions[0]!).balance(accountId))?.reserved ?? 0n) / PRICE_PICO);
  return { loop, instances, stats, batch, roundsPerSecond, holdsAtEnd, mode };
}

/**
 * The service's producer settings (idempotent, one request in flight, acks=all),
 * one small message per send() as the service publishes: how many publishes one
 * process can make per second, against the same broker.
 */
async function kafkaPublishRun(prefix: string, serviceSettings: boolean): Promise<LoopResult> {
  const kafka = new kafkajs.Kafka({ brokers: KAFKA.split(","), logLevel: kafkajs.logLevel.NOTHING });
  const topic = `${prefix}bench.publish`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 6 }], waitForLeaders: true }).finally(() => admin.disconnect());
  const producer = kafka.producer(
    serviceSettings
      ? { idempotent: true, maxInFlightRequests: 1, createPartitioner: kafkajs.Partitioners.DefaultPartitioner }
      : { createPartitioner: kafkajs.Partitioners.DefaultPartitioner },
  );
  await producer.connect();
  try {
    return await closedLoop(
      `kafka: send(), ${serviceSettings ? "idempotent, maxInFlightRequests 1 (as the service)" : "kafkajs defaults"}, acks=all`,
      CONNECTIONS,
      async () => {
        const jobId = randomUUID();
        await producer.send({ topic, acks: -1, messages: [{ key: jobId, value: JSON.stringify({ jobId }) }] });
        return "ok";
      },
      1000,
      4000,
    );
  } finally {
    await producer.disconnect();
  }
}

// ---------------------------------------------------------------- main

interface Started {
  readonly name: string;
  readonly process: ServiceProcess;
}

async function main(): Promise<void> {
  const begun = performance.now();
  const startedAt = new Date().toISOString();
  const loadBefore = sh("uptime", []);
  for (const [name, file] of [["cassandra", ".infra/run/cassandra/cassandra.pid"], ["kafka", ".infra/run/kafka/kafka.pid"]] as const) {
    try {
      cpu.pids.set(name, Number(readFileSync(new URL(`../${file}`, import.meta.url), "utf8").trim()));
    } catch {
      // not started by infra/up.sh: its CPU lands in "other processes"
    }
  }

  const backendA: Record<string, string> = { ...realBackendEnv(), KAFKA_PARTITIONS: "6" }; // job creation and the hot account through the service
  const backendB: Record<string, string> = { ...realBackendEnv(), KAFKA_PARTITIONS: "6" }; // create-to-done
  const backendC = realBackendEnv(); // the ledger in process (keyspace only)
  const dataDir = await mkdtemp(join(os.tmpdir(), "gen-bench-real-"));
  const secret = randomBytes(32).toString("hex");
  const started: Started[] = [];
  const sessions: CassandraClient[] = [];
  let receiver: Awaited<ReturnType<typeof webhookReceiver>> | undefined;

  const serviceEnv = (backend: Record<string, string>, role: string, extra: Record<string, string> = {}) => ({
    ...backend, ROLE: role, DATA_DIR: dataDir, URL_SIGNING_SECRET: secret, SIMULATED_LATENCY_MS: "0", ALLOW_PRIVATE_URLS: "true",
    SHUTDOWN_GRACE: "2s", WEBHOOK_RETRY_SCHEDULE: "1s,2s,5s", WEBHOOK_TIMEOUT: "5s", ...extra,
  });
  const start = async (name: string, env: Record<string, string>) => {
    const p = await startProcess(env, 90_000);
    started.push({ name, process: p });
    cpu.pids.set(name, p.child.pid!);
    return p;
  };

  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await receiver?.close().catch(() => {});
    await Promise.all(
      started.map(async ({ process: p }) => {
        const kill = setTimeout(() => p.child.kill("SIGKILL"), 20_000);
        await p.stop("SIGTERM").catch(() => {});
        clearTimeout(kill);
      }),
    );
    await Promise.all(sessions.map((s) => s.shutdown().catch(() => {})));
    for (const backend of [backendA, backendB, backendC]) {
      await dropRealBackend(backend).catch((error: unknown) => console.error(`dropping ${backend.CASSANDRA_KEYSPACE}: ${(error as Error).message}`));
    }
    await rm(dataDir, { recursive: true, force: true });
  };
  const onSignal = () => void cleanup().finally(() => process.exit(130));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  const report: string[] = [];
  try {
    // Schema creation on one keyspace is serialized (one process per keyspace first), the rest in parallel.
    process.stderr.write("starting service processes …\n");
    const [apiA1, apiB] = await Promise.all([start("api A1", serviceEnv(backendA, "api")), start("api B", serviceEnv(backendB, "api"))]);
    const [apiA2] = await Promise.all([
      start("api A2", serviceEnv(backendA, "api")),
      start("worker B", serviceEnv(backendB, "worker", { WORKER_CONCURRENCY: String(WORKER_CONCURRENCY) })),
      start("webhooks B", serviceEnv(backendB, "webhooks")),
    ]);
    const startupS = (performance.now() - begun) / 1000;

    // ---- 1. job creation, one account per connection
    const creators = await Promise.all(Array.from({ length: CONNECTIONS }, () => customer(apiA1.url)));
    const body = JSON.stringify({ model: MODEL, prompt: PROMPT });
    const creation = await postLoop(
      `1. POST /api/v1/generations, ${CONNECTIONS} accounts (one per connection), 1 API process`,
      creators.map((c) => ({ url: apiA1.url, apiKey: c.apiKey })),
      body,
    );
    const creationRows = await accountRows(backendA.CASSANDRA_KEYSPACE!, creators.map((c) => c.accountId));

    // ---- 2. create-to-done, measured at the webhook's arrival
    receiver = await webhookReceiver();
    const finishers = await Promise.all(Array.from({ length: CONNECTIONS }, () => customer(apiB.url)));
    const hookBody = JSON.stringify({ model: MODEL, prompt: PROMPT, callback_url: receiver.url });
    const endToEnd = async (name: string, inFlight: number, warmupMs: number, durationMs: number) => {
      const clients = Array.from({ length: inFlight }, () => new Client(portOf(apiB.url)));
      const requests = Array.from({ length: inFlight }, (_, i) => postBytes(apiB.url, "/api/v1/generations", finishers[i]!.apiKey, hookBody));
      const jobs: { jobId: string; loop: number; began: number; postMs: number; arrival: Arrival | undefined }[] = [];
      try {
        const loop = await closedLoop(name, inFlight, async (i) => {
          const began = performance.now();
          const reply = await clients[i]!.request(requests[i]!);
          const postMs = performance.now() - began;
          if (reply.status !== 202) return `POST HTTP ${reply.status}: ${reply.body.toString("utf8").slice(0, 200)}`;
          const jobId = (JSON.parse(reply.body.toString("utf8")) as { job_id: string }).job_id;
          const arrival = await receiver!.wait(jobId);
          jobs.push({ jobId, loop: i, began, postMs, arrival });
          if (!arrival) return `no webhook within ${WEBHOOK_WAIT_MS} ms`;
          return arrival.status === "success" ? "ok" : `webhook status ${arrival.status}`;
        }, warmupMs, durationMs);
        const measured = jobs.filter((j) => j.began >= loop.window.start && j.arrival && j.arrival.at <= loop.window.end);
        return { loop, measured, postMs: Float64Array.from(measured.map((j) => j.postMs)).sort() };
      } finally {
        await Promise.all(clients.map((c) => c.close()));
      }
    };
    const light = await endToEnd("2a. create → webhook (light load)", 4, 1000, 6000);
    const saturated = await endToEnd(`2b. create → webhook (saturated)`, CONNECTIONS, 3000, DURATION_MS);

    // Server-side timestamps of a sample of each run's jobs: where the time went.
    type Measured = (typeof saturated.measured)[number];
    const phasesOf = async (jobs: Measured[]) => {
      const phases = { queued: [] as number[], processing: [] as number[], notify: [] as number[], count: jobs.length };
      for (let i = 0; i < jobs.length; i += 8) {
        await Promise.all(
          jobs.slice(i, i + 8).map(async (j) => {
            const job = await json(`${apiB.url}/api/v1/jobs/${j.jobId}`, { headers: { authorization: `Bearer ${finishers[j.loop]!.apiKey}` }, expect: 200 });
            const created = Date.parse(job.created_at);
            const startedJob = Date.parse(job.started_at);
            const finishedAt = Date.parse(job.finished_at);
            phases.queued.push(startedJob - created);
            phases.processing.push(finishedAt - startedJob);
            phases.notify.push(j.arrival!.wallAt - finishedAt);
          }),
        );
      }
      for (const list of [phases.queued, phases.processing, phases.notify]) list.sort((a, b) => a - b);
      return phases;
    };
    const lightPhases = await phasesOf(light.measured.slice(-200));
    const saturatedPhases = await phasesOf(saturated.measured.slice(-200));
    const finisherRows = await accountRows(backendB.CASSANDRA_KEYSPACE!, finishers.map((c) => c.accountId));

    // ---- 3a. one hot account, one API process
    const hot1 = await customer(apiA1.url);
    const hotOne = await postLoop(
      `3a. POST, ONE account, ${CONNECTIONS} connections, 1 API process`,
      Array.from({ length: CONNECTIONS }, () => ({ url: apiA1.url, apiKey: hot1.apiKey })),
      body,
    );
    const hotOneRow = await accountRows(backendA.CASSANDRA_KEYSPACE!, [hot1.accountId]);

    // ---- 3c. one hot account, two API processes
    const hot2 = await customer(apiA1.url);
    const hotTwo = await postLoop(
      `3c. POST, ONE account, ${CONNECTIONS} connections split over 2 API processes`,
      Array.from({ length: CONNECTIONS }, (_, i) => ({ url: (i % 2 === 0 ? apiA1 : apiA2).url, apiKey: hot2.apiKey })),
      body,
    );
    const hotTwoRow = await accountRows(backendA.CASSANDRA_KEYSPACE!, [hot2.accountId]);

    // ---- 3b. the ledger adapter in process
    const cassandraConfig = {
      contactPoints: CASSANDRA.split(","), keyspace: backendC.CASSANDRA_KEYSPACE!, localDataCenter: "datacenter1",
      replication: { strategy: "SimpleStrategy" as const, factor: 1 },
    };
    for (let i = 0; i < 8; i++) sessions.push(await openSession(cassandraConfig));
    const ledgerRuns: LedgerRun[] = [];
    ledgerRuns.push(await ledgerRun(sessions, 1, 1, "reserve"));
    for (const instances of [1, 2, 4, 8]) ledgerRuns.push(await ledgerRun(sessions, instances, LEDGER_CALLERS, "reserve"));
    ledgerRuns.push(await ledgerRun(sessions, 1, 1, "reserve+release"));
    for (const instances of [1, 2, 4, 8]) ledgerRuns.push(await ledgerRun(sessions, instances, LEDGER_CALLERS, "reserve+release"));
    // The same four writers, each with a full queue: separates lost rounds from batches split four ways.
    ledgerRuns.push(await ledgerRun(sessions, 4, LEDGER_CALLERS * 4, "reserve+release"));

    // ---- aux: what one process's Kafka producer can publish
    const publishRuns = [await kafkaPublishRun(backendC.KAFKA_TOPIC_PREFIX!, true), await kafkaPublishRun(backendC.KAFKA_TOPIC_PREFIX!, false)];

    // ---- report
    const perRound = (row: { rounds: bigint; holds: number }) => (row.rounds > 0n ? row.holds / Number(row.rounds) : NaN);
    const outputs = [...started].map((s) => ({ name: s.name, lines: unexpectedOutput(s.process) }));
    report.push(
      "### Run",
      "",
      `- Command: \`npx tsx bench/real-backends.ts\` (BENCH_DURATION_S=${DURATION_MS / 1000}, BENCH_WARMUP_S=${WARMUP_MS / 1000}, BENCH_CONNECTIONS=${CONNECTIONS}, BENCH_LEDGER_S=${LEDGER_MS / 1000}, BENCH_LEDGER_CALLERS=${LEDGER_CALLERS})`,
      `- Started ${startedAt}; Cassandra ${await cassandraVersion()}; service processes up after ${fmt(startupS)} s; total wall time ${fmt((performance.now() - begun) / 1000, 0)} s`,
      `- Load before: \`${loadBefore}\``,
      `- Load after: \`${sh("uptime", [])}\``,
      "",
      "#### 1. Job creation (ROLE=api, one process; no worker, jobs stay queued)",
      "",
      ...LOOP_HEADER,
      loopRow(creation),
      "",
      `CPU (cores) while measuring: ${coresLine(creation.cores)}.`,
      `Account rows afterwards: ${creationRows.holds} holds over ${creationRows.rounds} Paxos rounds on ${CONNECTIONS} accounts (${fmt(perRound(creationRows), 2)} reservations per round).`,
      "",
      `#### 2. Create-to-done (api + worker (WORKER_CONCURRENCY=${WORKER_CONCURRENCY}) + webhooks, SIMULATED_LATENCY_MS=0), each loop: POST, then wait for its webhook`,
      "",
      "Latency = from writing the POST to the arrival of the job's webhook at a receiver on 127.0.0.1 (so it includes the job.finished hop and the delivery); ok/s = jobs finished and notified per second.",
      "",
      "| scenario | in flight | finished/s | p50 ms | p99 ms | max ms | ok | not ok | POST p50 ms | POST p99 ms |",
      "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
      ...[light, saturated].map((s) => `${loopRow(s.loop)} ${fmt(pct(s.postMs, 50))} | ${fmt(pct(s.postMs, 99))} |`),
      "",
      `CPU (cores), saturated: ${coresLine(saturated.loop.cores)}.`,
      `CPU (cores), light: ${coresLine(light.loop.cores)}.`,
      ...([["2a", lightPhases], ["2b", saturatedPhases]] as const).map(
        ([name, p]) =>
          `Server timestamps of the last ${p.count} measured jobs of ${name} (ms, p50 / p99): queued (created_at → started_at) ${fmt(pct(p.queued, 50), 0)} / ${fmt(pct(p.queued, 99), 0)}; ` +
          `processing (started_at → finished_at) ${fmt(pct(p.processing, 50), 0)} / ${fmt(pct(p.processing, 99), 0)}; ` +
          `finished_at → webhook arrival ${fmt(pct(p.notify, 50), 0)} / ${fmt(pct(p.notify, 99), 0)}.`,
      ),
      `Webhook deliveries received: ${receiver.deliveries()} for ${receiver.arrivals.size} distinct jobs. Holds still open on the 2x accounts afterwards: ${finisherRows.holds}.`,
      "",
      "#### 3. One hot account",
      "",
      ...LOOP_HEADER,
      loopRow(hotOne),
      loopRow(hotTwo),
      "",
      `3a account row: ${hotOneRow.holds} holds over ${hotOneRow.rounds} Paxos rounds (${fmt(perRound(hotOneRow), 2)} reservations per round); accepted per second: ${hotOne.perSecond.join(", ")}.`,
      `3c account row: ${hotTwoRow.holds} holds over ${hotTwoRow.rounds} Paxos rounds (${fmt(perRound(hotTwoRow), 2)} reservations per round); accepted per second: ${hotTwo.perSecond.join(", ")}.`,
      `CPU (cores) 3a: ${coresLine(hotOne.cores)}.`,
      `CPU (cores) 3c: ${coresLine(hotTwo.cores)}.`,
      "",
      `3b. \`CassandraLedger\` in this process, one account, ${LEDGER_CALLERS} concurrent callers (closed loops) spread over the instances; each instance has its own client and queue, as separate processes would:`,
      "",
      "`reserve`: every operation adds a hold, so the row (holds map, rewritten whole by every round) grows during the run. `reserve+release`: each caller reserves, then releases the same id, so the row stays small, as for an account whose jobs finish; its ok/s counts reserve+release pairs (two ledger operations each).",
      "",
      "| run | ok/s | p50 ms | p99 ms | max ms | ok | not ok | applied rounds/s | CAS attempts per applied round | mean serial read ms | mean CAS ms | operations per round: mean (p50, max) | rounds carrying 1 operation | holds at end |",
      "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
      ...ledgerRuns.map((l) => {
        const other = Object.entries(l.loop.outcomes).filter(([k]) => k !== "ok");
        const s = l.stats;
        return (
          `| ${l.mode}, ${l.instances} instance(s) × ${l.loop.concurrency / l.instances} | ${fmt(rate(l.loop), 0)} | ${fmt(pct(l.loop.latencies, 50))} | ${fmt(pct(l.loop.latencies, 99))} | ` +
          `${fmt(l.loop.latencies.at(-1) ?? NaN)} | ${l.loop.ok} | ${other.length ? other.map(([k, v]) => `${v}× ${k}`).join("; ") : "0"} | ` +
          `${fmt(l.roundsPerSecond, 0)} | ${fmt(s.casAttempts / s.casApplied, 2)} | ${fmt(s.readMs / s.reads, 2)} | ${fmt(s.casMs / s.casAttempts, 2)} | ` +
          `${fmt(l.batch.mean, 1)} (${l.batch.p50}, ${l.batch.max}) | ${fmt(l.batch.ones * 100, 0)}% | ${l.holdsAtEnd} |`
        );
      }),
      "",
      "(CAS attempts, read/CAS times and batch sizes cover warm-up + measured window; CAS answers of unknown outcome: " +
        ledgerRuns.map((l) => l.stats.ambiguous).join(", ") + ".)",
      "",
      ...ledgerRuns.map((l) => `- CPU (cores), ${l.loop.name}: ${coresLine(l.loop.cores)}; ok per second: ${l.loop.perSecond.join(", ")}${l.loop.errorSamples.length ? `; errors e.g. ${l.loop.errorSamples.join(" / ")}` : ""}`),
      "",
      "#### Aux: one process's Kafka producer, small messages, one send() per event as the service publishes",
      "",
      ...LOOP_HEADER,
      ...publishRuns.map((r) => loopRow(r)),
      "",
      ...publishRuns.map((r) => `- CPU (cores), ${r.name}: ${coresLine(r.cores)}`),
      "",
      "#### Service process output (besides start/stop banners)",
      "",
      ...outputs.map((a) => `- ${a.name}: ${a.lines.length} line(s)${a.lines.length ? `, e.g.:\n  \`\`\`\n  ${a.lines.slice(0, 4).map((l) => l.slice(0, 400)).join("\n  ")}\n  \`\`\`` : ""}`),
      ...[creation, light.loop, saturated.loop, hotOne, hotTwo].filter((r) => r.errorSamples.length).map((r) => `- ${r.name}: e.g. ${r.errorSamples.join(" / ")}`),
    );
  } finally {
    process.stderr.write("cleaning up …\n");
    // Output printed while stopping (shutdown errors) is part of the findings too.
    const before = new Map(started.map((s) => [s.name, s.process.output().length]));
    await cleanup();
    for (const s of started) {
      const tail = s.process.output().slice(before.get(s.name)).split("\n").filter((l) => l.trim() && !/^(SIGTERM: stopping|stopped$)/.test(l));
      if (tail.length) report.push(`- ${s.name} while stopping: ${tail.slice(0, 4).map((l) => l.slice(0, 300)).join(" / ")}`);
      const code = await s.process.exited;
      if (code !== 0) report.push(`- ${s.name} exited with ${code}`);
    }
  }
  process.off("SIGINT", onSignal);
  process.off("SIGTERM", onSignal);
  const text = report.join("\n");
  console.log(text);
  if (process.env.BENCH_OUT) await writeFile(process.env.BENCH_OUT, text + "\n");
}

await main();
