import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { configFrom } from "../../src/config/config.js";
import { startService, type RunningService } from "../../src/runtime/start-service.js";
import type { Config } from "../../src/config/config.js";
import cassandra from "cassandra-driver";
import kafkajs from "kafkajs";
import { testServiceLogger } from "./log-capture.js";
import { watchExit } from "./exit-watch.js";
import { givePooledKeyspaceBack, takePooledKeyspace } from "./keyspace-pool.js";
import { eventually } from "./eventually.js";

// Every test file that starts services names what kept its process alive, if anything did (test/support/exit-watch.ts).
// Only under the test runner (which sets NODE_TEST_CONTEXT in a file's process): the benchmarks import this module too.
if (process.env.NODE_TEST_CONTEXT) watchExit();

/** As long as a real one must be (ADMIN_TOKEN: 32 characters or more). */
export const ADMIN_TOKEN = "test-admin-token-0123456789abcdef";

/**
 * AUTH_FAILURE_LIMIT of test services: tests send wrong credentials on purpose, all from 127.0.0.1, so the budget of
 * failed credential checks is set out of their way; test/core/credential-guessing.test.ts tests the budget itself.
 */
export const TESTS_AUTH_FAILURE_LIMIT = "1000000";

/**
 * The backend every behavioural test runs against: "embedded" (the default:
 * SQLite in the service's DATA_DIR, durable in-process bus) or "real" (Cassandra + Kafka from infra/, at the addresses in
 * CASSANDRA_CONTACT_POINTS / KAFKA_BROKERS). `npm test` runs the suite once per backend.
 */
export const BACKEND = process.env.TEST_BACKEND === "real" ? "real" : "embedded";

let instances = 0;

/** The documented development values for one Cassandra node and one Kafka broker (infra/): the defaults ask for 3 replicas. */
export const SINGLE_NODE_REPLICATION: Readonly<Record<string, string>> = {
  CASSANDRA_REPLICATION_FACTOR: "1",
  KAFKA_REPLICATION_FACTOR: "1",
  KAFKA_MIN_INSYNC_REPLICAS: "1",
};

/** Settings that point a service at the real servers, isolated from every other service by a fresh keyspace and topic prefix. */
export function realBackendEnv(): Record<string, string> {
  const unique = `t${process.pid}_${Date.now().toString(36)}_${instances++}`;
  return {
    CASSANDRA_CONTACT_POINTS: process.env.CASSANDRA_CONTACT_POINTS || "127.0.0.1:9042",
    CASSANDRA_KEYSPACE: `gen_${unique}`.toLowerCase(),
    CASSANDRA_LOCAL_DC: "datacenter1",
    KAFKA_BROKERS: process.env.KAFKA_BROKERS || "127.0.0.1:9092",
    KAFKA_TOPIC_PREFIX: `${unique}.`,
    KAFKA_PARTITIONS: "3",
    ...SINGLE_NODE_REPLICATION,
  };
}

export interface TestService {
  readonly url: string;
  /** The service's DATA_DIR (SQLite file, blobs). */
  readonly dataDir: string;
  readonly grpcUrl: string;
  readonly running: RunningService;
  close(): Promise<void>;
}

/**
 * Starts the whole service (core on an h2c port, gateway on an HTTP port, both
 * ephemeral on loopback) with test-friendly settings; `env` overrides any of them.
 */
export async function startTestService(env: Record<string, string> = {}): Promise<TestService> {
  const dataDir = await mkdtemp(join(tmpdir(), "gen-service-test-"));
  const backend = BACKEND === "real" ? realBackendEnv() : {};
  // On the real backend, a migrated keyspace from the pool unless the test names its own (test/support/keyspace-pool.ts).
  const pooled = BACKEND === "real" && env.CASSANDRA_KEYSPACE === undefined;
  if (pooled) backend.CASSANDRA_KEYSPACE = takePooledKeyspace(backend.CASSANDRA_CONTACT_POINTS!) ?? backend.CASSANDRA_KEYSPACE!;
  const config = configFrom({
    HOST: "127.0.0.1",
    PORT: "0",
    GRPC_PORT: "0",
    ADMIN_TOKEN,
    AUTH_FAILURE_LIMIT: TESTS_AUTH_FAILURE_LIMIT,
    DATA_DIR: dataDir,
    SIMULATED_LATENCY_MS: "30",
    // TEST_LOG=1 shows the service's own logs when a test needs explaining.
    LOG_LEVEL: process.env.TEST_LOG ? "warn" : "silent",
    ALLOW_PRIVATE_URLS: "true",
    WEBHOOK_RETRY_SCHEDULE: "50ms,100ms,150ms",
    WEBHOOK_TIMEOUT: "2s",
    // Tests close services with slow jobs still running; those need not be waited for.
    SHUTDOWN_GRACE: "200ms",
    REAPER_INTERVAL: "500ms",
    // Tests stop services at once; the drain delay has tests of its own.
    DRAIN_DELAY: "0ms",
    ...backend,
    ...env,
  });
  const log = testServiceLogger();
  const running = await startService(config, log ? { logger: log.logger } : undefined);
  return {
    url: running.httpUrl,
    dataDir,
    grpcUrl: running.grpcUrl ?? "",
    running,
    async close() {
      await running.close();
      log?.flush();
      await rm(dataDir, { recursive: true, force: true });
      await dropRealBackendState(config, pooled ? "give back" : "drop");
    },
  };
}

/**
 * A test service's topics are dropped when it closes, and its keyspace dropped or, when it came from the pool,
 * emptied and given back: hundreds of keyspaces and topics left behind would exhaust the servers' memory.
 */
async function dropRealBackendState(config: Config, keyspace: "drop" | "give back"): Promise<void> {
  if (!config.cassandra || !config.kafka) return;
  const contactPoints = config.cassandra.contactPoints.join(",");
  await dropRealBackend({
    CASSANDRA_CONTACT_POINTS: contactPoints,
    ...(keyspace === "drop" ? { CASSANDRA_KEYSPACE: config.cassandra.keyspace } : {}),
    KAFKA_BROKERS: config.kafka.brokers.join(","),
    KAFKA_TOPIC_PREFIX: config.kafka.topicPrefix,
  });
  if (keyspace === "give back") await givePooledKeyspaceBack(contactPoints, config.cassandra.keyspace);
}

/**
 * realBackendEnv() with a migrated keyspace from the pool (test/support/keyspace-pool.ts) rather than a fresh one: for
 * service processes a test starts itself. Give it back with releaseRealBackend once none of them runs any more.
 */
export function pooledBackendEnv(): Record<string, string> {
  const env = realBackendEnv();
  env.CASSANDRA_KEYSPACE = takePooledKeyspace(env.CASSANDRA_CONTACT_POINTS!) ?? env.CASSANDRA_KEYSPACE!;
  return env;
}

/** What pooledBackendEnv() pointed at: its topics and consumer groups dropped, its keyspace emptied and given back. */
export async function releaseRealBackend(env: Record<string, string>): Promise<void> {
  const { CASSANDRA_KEYSPACE: keyspace, ...rest } = env;
  await dropRealBackend(rest);
  if (keyspace && env.CASSANDRA_CONTACT_POINTS) await givePooledKeyspaceBack(env.CASSANDRA_CONTACT_POINTS, keyspace);
}

/** Drops what realBackendEnv() pointed at: the keyspace, the topics and the consumer groups. */
export async function dropRealBackend(env: Record<string, string>): Promise<void> {
  const keyspace = env.CASSANDRA_KEYSPACE ?? "";
  if (keyspace.startsWith("gen_t")) {
    // A schema change waits for the node to apply it; beside a busy suite that took
    // longer than the driver's default 12 s, so this cleanup gets a minute.
    const client = new cassandra.Client({
      contactPoints: env.CASSANDRA_CONTACT_POINTS!.split(","), localDataCenter: "datacenter1", socketOptions: { readTimeout: 60_000 },
    });
    try {
      await client.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`);
    } finally {
      await client.shutdown();
    }
  }
  const prefix = env.KAFKA_TOPIC_PREFIX ?? "";
  if (prefix.startsWith("t")) {
    const admin = new kafkajs.Kafka({ brokers: env.KAFKA_BROKERS!.split(","), logLevel: kafkajs.logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      const topics = (await admin.listTopics()).filter((topic) => topic.startsWith(prefix));
      if (topics.length > 0) await admin.deleteTopics({ topics });
      const groups = (await admin.listGroups()).groups.map((g) => g.groupId).filter((id) => id.startsWith(prefix));
      if (groups.length > 0) await admin.deleteGroups(groups).catch(() => {});
    } finally {
      await admin.disconnect();
    }
  }
}

export interface ApiResponse<T = any> {
  readonly status: number;
  readonly headers: Headers;
  readonly json: T;
  readonly text: string;
}

export interface RequestOptions {
  readonly key?: string;
  readonly vendorKey?: string;
  readonly admin?: boolean;
  readonly body?: unknown;
  readonly rawBody?: string;
  readonly headers?: Record<string, string>;
}

/** One HTTP request to the gateway; parses JSON answers. */
export async function call<T = any>(service: { url: string }, method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  if (options.vendorKey) headers["x-vendor-api-key"] = options.vendorKey;
  if (options.admin) headers.authorization = `Bearer ${ADMIN_TOKEN}`;
  let body: string | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  const response = await fetch(service.url + path, { method, headers, body });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: jsonOrUndefined(text), text };
}

/** A response body as JSON, or undefined when it is empty or not JSON (tests look at the status first). */
export function jsonOrUndefined(text: string): any {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

export interface Customer {
  readonly accountId: string;
  readonly apiKey: string;
  readonly keyId: string;
}

/** An account with `balance` and a key granted `models` (every model but lite by default). */
export async function createCustomer(service: TestService, balance = "10.00", models: string[] = ["*"]): Promise<Customer> {
  const account = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name: "test", balance } });
  if (account.status !== 201) throw new Error(`account creation failed: ${account.status} ${account.text}`);
  const key = await call(service, "POST", `/admin/v1/accounts/${account.json.account_id}/keys`, { admin: true, body: { models } });
  if (key.status !== 201) throw new Error(`key creation failed: ${key.status} ${key.text}`);
  return { accountId: account.json.account_id, apiKey: key.json.api_key, keyId: key.json.key_id };
}

/** The suite's one polling helper, test/support/eventually.ts, where most tests already look for it. */
export { eventually } from "./eventually.js";

export const TERMINAL = new Set(["done", "failed", "canceled"]);

/** Polls GET job until it is done, failed or canceled. */
export async function finishedJob(service: TestService, apiKey: string, jobId: string, timeoutMs = 20_000) {
  const response = await eventually(
    () => call(service, "GET", `/api/v1/jobs/${jobId}`, { key: apiKey }),
    (r) => r.status !== 200 || TERMINAL.has(r.json.status),
    { timeoutMs, what: `job ${jobId} to finish` },
  );
  if (response.status !== 200) throw new Error(`GET job answered ${response.status}: ${response.text}`);
  return response.json;
}

export async function balanceOf(service: TestService, apiKey: string) {
  const response = await call(service, "GET", "/api/v1/balance", { key: apiKey });
  if (response.status !== 200) throw new Error(`balance answered ${response.status}`);
  return response.json as { balance: string; reserved: string; available: string };
}

/** Exact decimal arithmetic for assertions (picodollars), so tests never compare floats. */
export function pico(amount: string): bigint {
  const [whole, fraction = ""] = amount.split(".");
  const sign = whole!.startsWith("-") ? -1n : 1n;
  return sign * (BigInt(whole!.replace("-", "")) * 10n ** 12n + BigInt(fraction.padEnd(12, "0")));
}
