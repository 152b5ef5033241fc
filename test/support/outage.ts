import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { connect } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import cassandra from "cassandra-driver";
import kafkajs from "kafkajs";
import { call, dropRealBackend, eventually, jsonOrUndefined, pico, realBackendEnv, TERMINAL } from "./harness.js";
import { mapLimit, WebhookRecorder, type RecordedDelivery } from "./crash-clients.js";
import { gatewayUrlIn, READY_LINE } from "./service-output.js";
import { spawnServiceChild } from "./service-child.js";
import { REPO_ROOT } from "./repo.js";

/**
 * Helpers for tests that take Cassandra or Kafka away from a running service
 * and bring it back: the servers of infra/ stopped and started one at a time,
 * a service process that is not waited for (it may not become ready), a
 * monitor sampling probes and routes, and a creating client that records
 * every attempt (status, Retry-After, latency) while it retries one
 * Idempotency-Key until it gets a definitive answer.
 */

const ROOT = REPO_ROOT;

export type Server = "cassandra" | "kafka";

const PORTS: Record<Server, number> = { cassandra: 9042, kafka: 9092 };

/** True when something accepts TCP connections on the server's loopback port. */
export function portOpen(server: Server, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port: PORTS[server] });
    const done = (open: boolean) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

export interface ScriptRun {
  readonly code: number | string;
  readonly ms: number;
  readonly output: string;
}

async function infra(script: "up.sh" | "down.sh", server: Server, timeoutMs: number): Promise<ScriptRun> {
  const startedAt = Date.now();
  const child = spawn("bash", [`infra/${script}`], {
    cwd: ROOT,
    env: { ...process.env, INFRA_ONLY: server },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  // "exit", not "close": the servers are started detached and never hold our pipes, but be safe.
  const exited = once(child, "exit").then(([code, signal]) => (code ?? signal) as number | string);
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  try {
    const code = await exited;
    return { code, ms: Date.now() - startedAt, output };
  } finally {
    clearTimeout(timer);
  }
}

/** `INFRA_ONLY=<server> bash infra/down.sh`: stops the server (TERM, then KILL) and returns once it is gone. */
export async function stopServer(server: Server): Promise<ScriptRun> {
  const run = await infra("down.sh", server, 120_000);
  if (run.code !== 0) throw new Error(`infra/down.sh for ${server} failed (${run.code}):\n${run.output}`);
  return run;
}

/** `INFRA_ONLY=<server> bash infra/up.sh`: starts the server and returns once it answers a real client request. */
export async function startServer(server: Server): Promise<ScriptRun> {
  const run = await infra("up.sh", server, 240_000);
  if (run.code !== 0) throw new Error(`infra/up.sh for ${server} failed (${run.code}):\n${run.output}`);
  return run;
}

/** For `before`/`after` hooks: starts every server whose port does not answer (a test that failed midway leaves one down). */
export async function ensureServersUp(): Promise<void> {
  for (const server of ["kafka", "cassandra"] as const) {
    if (!(await portOpen(server))) await startServer(server);
  }
}

/** A service process started without waiting for "ready": it may start while a server is down. */
export interface SpawnedService {
  readonly child: ChildProcess;
  readonly output: () => string;
  /** Each chunk of output with the time it arrived (ms since epoch), for explaining a run. */
  readonly timeline: { at: number; text: string }[];
  readonly exited: Promise<number | string>;
  readonly alive: () => boolean;
  /** Resolves with the first match of `pattern` in the output (stdout and stderr), rejects on exit or timeout. */
  waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray>;
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/** Runs the service as a separate process with `env` (spawnServiceChild, as startProcess does). */
export function spawnService(env: Record<string, string>): SpawnedService {
  const child = spawnServiceChild(env);
  let output = "";
  const timeline: { at: number; text: string }[] = [];
  const listeners = new Set<() => void>();
  const append = (chunk: Buffer) => {
    output += chunk;
    timeline.push({ at: Date.now(), text: chunk.toString() });
    for (const listener of listeners) listener();
  };
  child.stdout!.on("data", append);
  child.stderr!.on("data", append);
  const exited = once(child, "exit").then(([code, signal]) => (code ?? signal) as number | string);
  const alive = () => child.exitCode === null && child.signalCode === null;
  return {
    child,
    output: () => output,
    timeline,
    exited,
    alive,
    waitFor(pattern, timeoutMs) {
      return new Promise((resolve, reject) => {
        const finish = (error?: Error, match?: RegExpExecArray) => {
          clearTimeout(timer);
          listeners.delete(check);
          if (error) reject(error);
          else resolve(match!);
        };
        const check = () => {
          const match = pattern.exec(output);
          if (match) finish(undefined, match);
        };
        const timer = setTimeout(() => finish(new Error(`no ${pattern} in ${timeoutMs} ms; output:\n${output}`)), timeoutMs);
        listeners.add(check);
        void exited.then((code) => finish(new Error(`process exited (${code}) before ${pattern}; output:\n${output}`)));
        check();
      });
    },
    async stop(signal: NodeJS.Signals = "SIGKILL") {
      if (alive()) child.kill(signal);
      return exited;
    },
  };
}

/** One HTTP answer as a client saw it. */
export interface Sample {
  readonly path: string;
  /** When the request was sent (ms since epoch). */
  readonly at: number;
  /** How long the answer took; for a failed request, until it failed. */
  readonly ms: number;
  /** 0 when there was no HTTP answer (connection error or the client's own timeout). */
  readonly status: number;
  readonly retryAfter: string | null;
  readonly json: any;
  readonly text: string;
  readonly error?: string;
}

export interface TimedRequest {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  /** The client's own bound; past it the attempt is recorded as status 0 (a hang). */
  readonly timeoutMs?: number;
}

/** One request, timed; never throws. */
export async function timed(baseUrl: string, path: string, request: TimedRequest = {}): Promise<Sample> {
  const at = Date.now();
  try {
    const response = await fetch(baseUrl + path, {
      method: request.method ?? "GET",
      headers: request.headers,
      body: request.body,
      signal: AbortSignal.timeout(request.timeoutMs ?? 30_000),
    });
    const text = await response.text();
    const json = jsonOrUndefined(text);
    return { path, at, ms: Date.now() - at, status: response.status, retryAfter: response.headers.get("retry-after"), json, text };
  } catch (error) {
    return { path, at, ms: Date.now() - at, status: 0, retryAfter: null, json: undefined, text: "", error: describeError(error) };
  }
}

/**
 * Polls each path in its own loop (one request in flight per path, `intervalMs`
 * between answers) and keeps every sample, so a test can say afterwards what
 * each route answered at every moment of the outage, and how fast.
 */
export class Monitor {
  readonly samples: Sample[] = [];
  private running = true;
  private readonly loops: Promise<void>[];

  constructor(baseUrl: string, paths: readonly { path: string; headers?: Record<string, string> }[], intervalMs = 200) {
    this.loops = paths.map(async ({ path, headers }) => {
      while (this.running) {
        this.samples.push(await timed(baseUrl, path, { headers }));
        await delay(intervalMs); // the sampling rate, not a wait for a condition
      }
    });
  }

  of(path: string, since = 0, until = Infinity): Sample[] {
    return this.samples.filter((s) => s.path === path && s.at >= since && s.at <= until);
  }

  /** The first sample of `path` sent at or after `since` that satisfies `predicate`. */
  first(path: string, since: number, predicate: (s: Sample) => boolean): Sample | undefined {
    return this.samples.find((s) => s.path === path && s.at >= since && predicate(s));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }
}

export interface Attempt extends Sample {
  readonly key: string;
}

export interface RecordedOutcome {
  readonly key: string;
  readonly body: unknown;
  /** The definitive status (202 or a 4xx other than 409/429); 0 when given up. */
  readonly status: number;
  readonly json: any;
  readonly attempts: readonly Attempt[];
}

/** An answer that says nothing definitive yet: retry the same request with the same key. */
export const isTransient = (status: number) => status === 0 || status === 409 || status === 429 || status >= 500;

/**
 * POST /api/v1/generations with one Idempotency-Key, repeated with the same
 * body and key after connection errors, 409, 429 and 5xx (honouring
 * Retry-After, capped at `maxPauseMs`), until a 202 or another 4xx; every
 * attempt is appended to `log` as it ends. Gives up (status 0) once `stop`
 * is aborted or `deadline` passes.
 */
export async function createRecorded(options: {
  baseUrl: string;
  apiKey: string;
  key: string;
  body: unknown;
  log: Attempt[];
  deadline: number;
  stop?: AbortSignal;
  attemptTimeoutMs?: number;
  maxPauseMs?: number;
}): Promise<RecordedOutcome> {
  const attempts: Attempt[] = [];
  const payload = JSON.stringify(options.body);
  const maxPauseMs = options.maxPauseMs ?? 1000;
  for (;;) {
    if (options.stop?.aborted || Date.now() > options.deadline) return { key: options.key, body: options.body, status: 0, json: undefined, attempts };
    const sample = await timed(options.baseUrl, "/api/v1/generations", {
      method: "POST",
      headers: { authorization: `Bearer ${options.apiKey}`, "content-type": "application/json", "idempotency-key": options.key },
      body: payload,
      timeoutMs: options.attemptTimeoutMs ?? 30_000,
    });
    const attempt: Attempt = { ...sample, key: options.key };
    attempts.push(attempt);
    options.log.push(attempt);
    if (!isTransient(sample.status)) return { key: options.key, body: options.body, status: sample.status, json: sample.json, attempts };
    const retryAfter = Number(sample.retryAfter);
    await delay(Number.isFinite(retryAfter) && retryAfter > 0 ? Math.min(retryAfter * 1000, maxPauseMs) : 100);
  }
}

/** Max, median and 99th percentile of a list of latencies (ms). */
export function latencies(values: readonly number[]): { n: number; max: number; p50: number; p99: number } {
  if (values.length === 0) return { n: 0, max: 0, p50: 0, p99: 0 };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { n: sorted.length, max: sorted[sorted.length - 1]!, p50: at(0.5), p99: at(0.99) };
}

/** Counts of each status, e.g. {"202": 40, "503": 12}. */
export function statusCounts(samples: readonly Sample[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const s of samples) counts[s.status] = (counts[s.status] ?? 0) + 1;
  return counts;
}

export const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  const code = cause && typeof cause === "object" && "code" in cause ? String((cause as { code: unknown }).code) : "";
  return `${error.name}: ${error.message}${code ? ` (${code})` : ""}`;
}

/**
 * Clients creating image jobs, each with a fresh Idempotency-Key retried
 * until definitive (createRecorded), at a client's pace, until `finish()`.
 * Every attempt of every client lands in `attempts`, in the order they end.
 */
export class Workload {
  readonly attempts: Attempt[] = [];
  readonly outcomes: RecordedOutcome[] = [];
  private creating = true;
  private readonly giveUp = new AbortController();
  private readonly clients: Promise<void>[];

  constructor(options: {
    baseUrl: string;
    apiKey: string;
    clients: number;
    /** The request of client `client`'s `seq`-th key. */
    body: (key: string, client: number, seq: number) => Record<string, unknown>;
    /** Pause between one key's definitive answer and the next key (a client's pace). */
    paceMs: number;
    deadline: number;
  }) {
    this.clients = Array.from({ length: options.clients }, async (_, client) => {
      for (let seq = 0; this.creating; seq++) {
        const key = `outage-c${client}-${seq}-${Math.random().toString(36).slice(2, 10)}`;
        const outcome = await createRecorded({
          baseUrl: options.baseUrl, apiKey: options.apiKey, key, body: options.body(key, client, seq),
          log: this.attempts, deadline: options.deadline, stop: this.giveUp.signal,
        });
        this.outcomes.push(outcome);
        await delay(options.paceMs); // a client's pace, not a wait for a condition
      }
    });
  }

  /** Outcomes answered 202. */
  accepted(): RecordedOutcome[] {
    return this.outcomes.filter((o) => o.status === 202);
  }

  /** Attempts sent at or after `since` (and before `until`). */
  between(since: number, until = Infinity): Attempt[] {
    return this.attempts.filter((a) => a.at >= since && a.at < until);
  }

  /** Stops starting new keys and waits until every client has its current key's definitive answer. */
  async finish(): Promise<void> {
    this.creating = false;
    await Promise.all(this.clients);
  }

  /** Stops at once (after hooks): keys still being retried are given up. */
  async abort(): Promise<void> {
    this.creating = false;
    this.giveUp.abort();
    await Promise.allSettled(this.clients);
  }
}

export interface Books {
  /** The final view of every accepted job, by job id. */
  readonly jobs: Map<string, any>;
  readonly done: number;
  readonly failed: number;
  readonly balance: string;
  readonly charged: bigint;
  readonly deliveries: number;
}

/**
 * What an outage must not break, checked after it: every 202 job reaches
 * done/failed; no two keys share a job and a replay of every key gives back
 * its one job (Idempotent-Replayed) and charges nothing; each done job is
 * charged its reservation once, a failed one nothing; credits − balance =
 * Σ charged, nothing stays reserved; every job has one webhook-id, accepted
 * by the receiver, and no webhook is about a job no client was told about.
 */
export async function checkBooks(options: {
  baseUrl: string;
  apiKey: string;
  accountId: string;
  credit: string;
  accepted: readonly RecordedOutcome[];
  recorder: WebhookRecorder;
  secret: string;
  timeoutMs?: number;
}): Promise<Books> {
  const api = { url: options.baseUrl };
  const { apiKey, accepted, recorder } = options;
  const jobIdOf = new Map(accepted.map((o) => [o.key, o.json?.job_id as string]));
  for (const o of accepted) {
    assert.equal(o.json?.status, "queued", `202 body of ${o.key}: ${JSON.stringify(o.json)}`);
    assert.match(jobIdOf.get(o.key) ?? "", /^[0-9a-f-]{36}$/);
  }
  const byJob = new Map(accepted.map((o) => [jobIdOf.get(o.key)!, o]));
  assert.equal(byJob.size, accepted.length, "no two Idempotency-Keys were answered with the same job");

  // Every accepted job reaches done or failed, and none is lost.
  const jobs = new Map<string, any>();
  const lost: string[] = [];
  await eventually(
    async () => {
      const open = [...byJob.keys()].filter((id) => !TERMINAL.has(jobs.get(id)?.status));
      await mapLimit(open, 16, async (id) => {
        const response = await call(api, "GET", `/api/v1/jobs/${id}`, { key: apiKey });
        if (response.status === 200) jobs.set(id, response.json);
        else lost.push(`${id}: GET answered ${response.status} ${response.text}`);
      });
      return [...byJob.keys()].filter((id) => !TERMINAL.has(jobs.get(id)?.status)).map((id) => `${id} ${jobs.get(id)?.status}`);
    },
    (open) => open.length === 0 || lost.length > 0,
    { timeoutMs: options.timeoutMs ?? 90_000, intervalMs: 250, what: "every accepted job to be done or failed" },
  );
  assert.deepEqual(lost, [], "every job answered 202 exists");

  // Each done job charged its reservation once, failed ones nothing, the balance exact.
  let charged = 0n;
  let done = 0;
  for (const [id, job] of jobs) {
    const usage = { charged: pico(job.usage.charged), reserved: pico(job.usage.reserved) };
    if (job.status === "done") {
      done++;
      assert.ok(usage.charged > 0n, `done job ${id} was charged: ${JSON.stringify(job.usage)}`);
      assert.equal(usage.charged, usage.reserved, `job ${id} charged its price exactly once: ${JSON.stringify(job.usage)}`);
    } else {
      assert.equal(usage.charged, 0n, `failed job ${id} charged nothing: ${JSON.stringify(job)}`);
    }
    charged += usage.charged;
  }
  const balance = await call(api, "GET", "/api/v1/balance", { key: apiKey });
  assert.equal(balance.status, 200, balance.text);
  assert.equal(
    pico(options.credit) - pico(balance.json.balance), charged,
    `credits − balance = Σ charged (${options.credit} − ${balance.json.balance} vs ${charged} pico): a difference is money taken for a job no client was told about, or lost`,
  );
  assert.equal(pico(balance.json.reserved), 0n, `nothing stays reserved: ${balance.text}`);
  const admin = await call(api, "GET", `/admin/v1/accounts/${options.accountId}/balance`, { admin: true });
  assert.equal(admin.status, 200, admin.text);
  assert.equal(pico(admin.json.balance), pico(balance.json.balance), `admin view agrees: ${admin.text}`);
  assert.equal(pico(admin.json.reserved), 0n, `admin view agrees: ${admin.text}`);

  // No key stands for two jobs: replaying every accepted request gives back its one job, charging nothing.
  const replayLog: Attempt[] = [];
  const replays = await mapLimit(accepted, 8, (o) =>
    createRecorded({ baseUrl: options.baseUrl, apiKey, key: o.key, body: o.body, log: replayLog, deadline: Date.now() + 60_000 }),
  );
  accepted.forEach((o, i) => {
    const replay = replays[i]!;
    assert.equal(replay.status, 202, `replay of ${o.key}: ${JSON.stringify(replay.json)}`);
    assert.equal(replay.json.job_id, jobIdOf.get(o.key), `Idempotency-Key ${o.key} stands for one job`);
    assert.equal(replay.attempts.at(-1)!.status, 202);
  });
  const afterReplays = await call(api, "GET", "/api/v1/balance", { key: apiKey });
  assert.equal(afterReplays.json.balance, balance.json.balance, "replays charge nothing");
  assert.equal(pico(afterReplays.json.reserved), 0n, "replays reserve nothing");

  // One webhook-id per job, accepted by the receiver; none for a job nobody was told about.
  await eventually(
    async () => [...byJob.keys()].filter((id) => !recorder.forJob(id).some((d) => d.answered === 200)),
    (missing) => missing.length === 0,
    { timeoutMs: 60_000, intervalMs: 100, what: "a webhook accepted for every finished job" },
  );
  const deliveriesOf = new Map<string, RecordedDelivery[]>();
  for (const d of recorder.deliveries) {
    const id = String(d.json?.job_id);
    deliveriesOf.set(id, [...(deliveriesOf.get(id) ?? []), d]);
  }
  assert.deepEqual([...deliveriesOf.keys()].filter((id) => !byJob.has(id)), [], "no webhook for a job no client was answered 202 for");
  const owners = new Map<string, string>();
  for (const [id, deliveries] of deliveriesOf) {
    const ids = new Set(deliveries.map((d) => d.headers["webhook-id"]));
    assert.equal(ids.size, 1, `job ${id}: every delivery carries one webhook-id, got ${JSON.stringify([...ids])}`);
    const webhookId = [...ids][0]!;
    assert.equal(owners.get(webhookId), undefined, `webhook-id ${webhookId} belongs to one job`);
    owners.set(webhookId, id);
    for (const d of deliveries) {
      assert.doesNotThrow(() => WebhookRecorder.verify(options.secret, d), `delivery for ${id} is signed with the account's secret`);
      assert.equal(d.json.status, jobs.get(id).status === "done" ? "success" : "failed", `webhook status of ${id}`);
    }
  }
  return { jobs, done, failed: jobs.size - done, balance: balance.json.balance, charged, deliveries: recorder.deliveries.length };
}

/** An account with `credit`, a key for every model (but lite), and its webhook pointed at `webhookUrl`. */
export async function setUpCustomer(baseUrl: string, credit: string, webhookUrl: string) {
  const api = { url: baseUrl };
  const account = await call(api, "POST", "/admin/v1/accounts", { admin: true, body: { name: "outage", balance: credit } });
  assert.equal(account.status, 201, account.text);
  const accountId = account.json.account_id as string;
  const key = await call(api, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { models: ["*"] } });
  assert.equal(key.status, 201, key.text);
  const hook = await call(api, "PUT", `/admin/v1/accounts/${accountId}/webhook`, { admin: true, body: { url: webhookUrl } });
  assert.equal(hook.status, 200, hook.text);
  return { accountId, apiKey: key.json.api_key as string, secret: hook.json.secret as string };
}

/** Resolves with the time the server's port first accepts connections (polled every 100 ms). */
export async function portOpensAt(server: Server, timeoutMs = 240_000): Promise<number> {
  await eventually(() => portOpen(server, 500), Boolean, { timeoutMs, intervalMs: 100, what: `${server}'s port to open` });
  return Date.now();
}

/** True when the server answers a real client request now (a CQL query; a Kafka cluster description). */
export async function serverAnswers(server: Server): Promise<boolean> {
  if (server === "cassandra") {
    const client = new cassandra.Client({
      contactPoints: ["127.0.0.1:9042"], localDataCenter: "datacenter1",
      socketOptions: { connectTimeout: 500, readTimeout: 1000 }, pooling: { warmup: false },
    });
    try {
      await client.execute("SELECT release_version FROM system.local");
      return true;
    } catch {
      return false;
    } finally {
      await client.shutdown().catch(() => {});
    }
  }
  const admin = new kafkajs.Kafka({
    brokers: ["127.0.0.1:9092"], connectionTimeout: 500, requestTimeout: 1000, retry: { retries: 0 }, logLevel: kafkajs.logLevel.NOTHING,
  }).admin();
  try {
    await admin.connect();
    return (await admin.describeCluster()).brokers.length > 0;
  } catch {
    return false;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/**
 * Resolves with the first time (ms since epoch) the server answers a real
 * client request, polled every 100 ms: a finer measure of "the server is
 * back" than infra/up.sh's return (its waiter polls every second).
 */
export async function serverAnswersAt(server: Server, timeoutMs = 240_000): Promise<number> {
  await eventually(() => serverAnswers(server), Boolean, { timeoutMs, intervalMs: 100, what: `${server} to answer` });
  return Date.now();
}

/**
 * OUTAGE_DUMP=<dir> keeps a service's output there, each chunk stamped with
 * its arrival in seconds since `zero`, and the test's own `marks` (server
 * stopped, back, ...) in between: for explaining a run.
 */
export async function dumpOutput(
  name: string, service: SpawnedService, zero: number, marks: readonly { at: number; text: string }[] = [],
): Promise<void> {
  const dir = process.env.OUTAGE_DUMP;
  if (!dir) return;
  const events = [...service.timeline, ...marks.map((m) => ({ at: m.at, text: `==== ${m.text}\n` }))].sort((a, b) => a.at - b.at);
  const text = events.map((e) => `[${((e.at - zero) / 1000).toFixed(2).padStart(8)}] ${e.text.trimEnd().replace(/\n/g, "\n           ")}`).join("\n");
  await writeFile(`${dir}/${name}.log`, `${text}\n`).catch(() => {});
}

/** Spawns the service and waits for "ready", like startProcess, reading its gateway URL; the process keeps its timeline. */
export async function runService(env: Record<string, string>, readyTimeoutMs = 60_000): Promise<SpawnedService & { url: string }> {
  const service = spawnService(env);
  try {
    await service.waitFor(READY_LINE, readyTimeoutMs);
  } catch (error) {
    await service.stop("SIGKILL");
    throw error;
  }
  const url = gatewayUrlIn(service.output());
  return Object.assign(service, { url });
}

/**
 * Keeps an outage going until `holdMs` after it began while checking that the
 * process serves as it should meanwhile (`check` throws otherwise). The
 * outage's length is part of the scenario (long enough to outlast the
 * clients' own retry budgets, e.g. kafkajs's KAFKA_RETRIES), not a wait for a condition.
 */
export async function holdOutage(since: number, holdMs: number, check: () => Promise<void>): Promise<void> {
  while (Date.now() - since < holdMs) {
    await check();
    await delay(Math.min(250, Math.max(0, holdMs - (Date.now() - since))));
  }
  await check();
}

/**
 * One outage scenario's shared parts: a process of every role on a fresh
 * keyspace and topic prefix, a customer whose webhook goes to a recorder,
 * probes sampled throughout, clients creating jobs, the server taken down,
 * and the clean-up that brings the servers back whatever happened.
 */
export class OutageRun {
  service: Awaited<ReturnType<typeof runService>> | undefined;
  readonly marks: { at: number; text: string }[] = [];
  readonly zero = Date.now();
  workload: Workload | undefined;
  monitor: Monitor | undefined;
  env: Record<string, string> | undefined;
  readonly recorder = new WebhookRecorder(0);

  constructor(
    readonly server: "cassandra" | "kafka",
    private readonly options: { credit: string; model: string },
  ) {}

  mark(text: string, at = Date.now()): number {
    this.marks.push({ at, text });
    return at;
  }

  /**
   * Starts everything and waits until jobs are under way (at least 30
   * accepted, one of them processing), so the outage hits work in flight.
   */
  async begin(paceMs: number, env: Record<string, string> = {}) {
    this.env = {
      ...realBackendEnv(),
      DATA_DIR: await mkdtemp(join(tmpdir(), `gen-outage-${this.server}-`)),
      URL_SIGNING_SECRET: randomBytes(16).toString("hex"),
      ALLOW_PRIVATE_URLS: "true",
      REAPER_INTERVAL: "300ms",
      JOB_LEASE: "2s",
      REQUEUE_AFTER: "3s",
      SIMULATED_LATENCY_MS: "500",
      DEPENDENCY_CHECK_INTERVAL: "250ms",
      WEBHOOK_RETRY_SCHEDULE: "200ms,500ms,1s,2s,5s,10s",
      ...env,
    };
    const service = (this.service = await runService(this.env));
    await this.recorder.start();
    const customer = await setUpCustomer(service.url, this.options.credit, this.recorder.url);
    const ready = await call(service, "GET", "/readyz");
    assert.equal(ready.status, 200, ready.text);
    assert.deepEqual(ready.json, { status: "ok", checks: { cassandra: "up", kafka: "up" } });
    this.monitor = new Monitor(service.url, [
      { path: "/readyz" },
      { path: "/livez" },
      { path: "/api/v1/balance", headers: { authorization: `Bearer ${customer.apiKey}` } },
    ]);
    const model = this.options.model;
    const load = (this.workload = new Workload({
      baseUrl: service.url, apiKey: customer.apiKey, clients: 6, paceMs, deadline: Date.now() + 480_000,
      body: (key, client) => ({ model, prompt: `a lighthouse, take ${key}`, aspect_ratio: "16:9", metadata: { key, client } }),
    }));
    await eventually(async () => load.accepted().length, (n) => n >= 30, { timeoutMs: 60_000, what: "30 jobs accepted before the outage" });
    const inFlight = await eventually(
      async () => (await mapLimit(load.accepted(), 16, (o) => call(service, "GET", `/api/v1/jobs/${o.json.job_id}`, { key: customer.apiKey })))
        .map((r) => r.json?.status as string).filter((status) => !TERMINAL.has(status)),
      (open) => open.some((status) => status === "processing"),
      { timeoutMs: 30_000, intervalMs: 50, what: "a job in processing before the outage" },
    );
    return { service, pid: service.child.pid, ...customer, load, inFlight };
  }

  /** Stops the server and waits until /readyz answers 503 naming it, with Retry-After. */
  async takeDown() {
    const stopAt = this.mark("down.sh began");
    const stopRun = await stopServer(this.server);
    const stoppedAt = this.mark("down.sh returned (server gone)");
    const name = new RegExp(this.server, "i");
    const readyDown = await eventually(
      () => call(this.service!, "GET", "/readyz"),
      (r) => r.status === 503 && name.test(r.json?.reason ?? ""),
      { timeoutMs: 20_000, intervalMs: 100, what: `/readyz 503 naming ${this.server}` },
    );
    const readyDownAt = this.mark("/readyz 503 seen");
    assert.equal(readyDown.json.status, "unavailable", readyDown.text);
    assert.equal(readyDown.json.checks[this.server], "down", readyDown.text);
    assert.ok(Number(readyDown.headers.get("retry-after")) > 0, `/readyz 503 has Retry-After: ${readyDown.headers.get("retry-after")}`);
    return { stopAt, stopRun, stoppedAt, readyDown, readyDownAt };
  }

  /** For `after`: stops everything, dumps the output when asked, and brings the servers back up for the next suite. */
  async cleanUp(dumpName: string): Promise<void> {
    await this.workload?.abort();
    await this.monitor?.stop();
    await this.service?.stop("SIGKILL").catch(() => {});
    if (this.service) await dumpOutput(dumpName, this.service, this.zero, this.marks);
    await this.recorder.close();
    await ensureServersUp(); // a failure midway must not leave the server down for the next suite
    if (this.env) {
      await dropRealBackend(this.env).catch(() => {});
      await rm(this.env.DATA_DIR!, { recursive: true, force: true });
    }
  }
}
