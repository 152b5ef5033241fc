import { randomBytes } from "node:crypto";
import ipaddr from "ipaddr.js";
import { hostname } from "node:os";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parsePriceTable, type ModelPricesText, type PriceTable } from "../domain/pricing/price-table.js";
import { parseRoutesFile, type Route, type RoutesFile } from "../domain/routing/routes.js";
import { findModel } from "../domain/catalog/models.js";
import type { WorkerOptions } from "../core/workers/generation-worker.js";
import type { WebhookFairness } from "../core/workers/webhook-dispatcher.js";
import type { TracingSettings } from "../adapters/observability/tracing.js";
import { DEFAULT_LIMITS, KIB, MIB, type ValidationLimits } from "../domain/validation/limits.js";
import type { FailureBudget } from "../domain/accounts/failed-credentials.js";

/** The whole configuration, read from the environment once at boot. Nothing else reads process.env. */
export interface Config {
  readonly host: string;
  readonly port: number;
  readonly grpcPort: number;
  readonly adminToken: string;
  /** True when ADMIN_TOKEN was not set and a random one was made for this run. */
  readonly adminTokenGenerated: boolean;
  /** AUTH_FAILURE_LIMIT per AUTH_FAILURE_WINDOW: wrong credentials a client address may present before it is refused 429. */
  readonly authFailures: FailureBudget;
  readonly publicBaseUrl: string | undefined;
  /**
   * TRUST_PROXY: the proxies in front of PORT whose X-Forwarded-Proto/-For/-Host are believed (Fastify's trustProxy):
   * false (the default) believes no one; true believes every peer; otherwise addresses, CIDRs and proxy-addr's names.
   */
  readonly trustProxy: boolean | readonly string[];
  readonly allowPrivateUrls: boolean;
  readonly simulatedLatencyMs: number;
  /** Worker threads the simulator renders images and videos on (0: on the event loop). */
  readonly simulatedRenderThreads: number;
  readonly dataDir: string;
  readonly resultUrlTtlSeconds: number;
  readonly urlSigningSecret: Buffer;
  readonly webhookRetryScheduleMs: readonly number[];
  readonly webhookTimeoutMs: number;
  /** Per-destination and per-account limits of webhook requests, and the breaker per destination (issue 34). */
  readonly webhookFairness: WebhookFairness;
  readonly maxInputImages: number;
  readonly maxInputBytes: number;
  /** Prompt and metadata limits (and the two above), as validation enforces them. */
  readonly limits: ValidationLimits;
  /** Timeouts, sizes and connection caps of both listening ports. */
  readonly edge: EdgeLimits;
  /** Jobs of one account accepted and not yet finished; beyond it 429 with Retry-After. */
  readonly maxQueuedJobsPerAccount: number;
  readonly idempotencyTtlMs: number;
  readonly prices: PriceTable;
  /** When set, this process is a gateway in front of a remote core at that URL. */
  readonly coreUrl: string | undefined;
  /** CORS_ORIGINS: the web origins (scheme://host[:port]) whose pages may call the gateway port; none: no CORS at all. */
  readonly corsOrigins: readonly string[];
  readonly logLevel: string;
  readonly retryAfterSeconds: number;
  /** Which parts this process runs. */
  readonly roles: ReadonlySet<Role>;
  readonly cassandra: CassandraConfig | undefined;
  readonly kafka: KafkaConfig | undefined;
  readonly worker: WorkerOptions;
  /** How long SIGTERM waits for in-flight work before handing it back. */
  readonly shutdownGraceMs: number;
  /** Upstream routes to the vendor's API; undefined means the simulated provider. */
  readonly routes: readonly Route[] | undefined;
  /** How often a long-running upstream video operation is polled. */
  readonly upstreamPollMs: number;
  /** UPSTREAM_VIDEO_MAX_BYTES: the largest video file downloaded from an upstream. */
  readonly upstreamVideoMaxBytes: number;
  /** INPUT_FETCH_TIMEOUT: how long fetching one input image from its URL may take. */
  readonly inputFetchTimeoutMs: number;
  /** Where the embedded default keeps its state: "sqlite" (durable, DATA_DIR/service.db) or "memory" (lost on restart). */
  readonly embeddedStore: "sqlite" | "memory";
  /** SQLite's synchronous setting: "full" survives a power loss, "normal" a process crash only. */
  readonly sqliteSynchronous: "normal" | "full" | "extra";
  /** JOB_RETENTION: how long finished jobs and their files are kept. */
  readonly jobRetentionMs: number;
  /** How often the retention sweeper runs (worker role). */
  readonly retentionSweepMs: number;
  /** How long accepting one job may take; a key still being accepted after that belongs to a dead acceptance. */
  readonly acceptTimeoutMs: number;
  /** On SIGTERM: how long /readyz says 503 while requests are still served, before the ports close. */
  readonly drainDelayMs: number;
  /** How often Cassandra, Kafka or SQLite are probed for readiness. */
  readonly dependencyCheckMs: number;
  /** Bound of one publish to Kafka. */
  readonly publishTimeoutMs: number;
  /** CANCEL_GRACE: how long a cancel of a processing job waits for its worker to abort it before ending it itself. */
  readonly cancelGraceMs: number;
  /** WATCH_FALLBACK: how long a watcher trusts the job feed alone before reading the job anyway. */
  readonly watchFallbackMs: number;
  /** SSE_KEEPALIVE: how often an idle event stream (GET /api/v1/jobs/{id}/events) sends a comment. */
  readonly sseKeepAliveMs: number;
  /**
   * METRICS_PORT: where a process without the api role (worker, webhooks) serves GET /metrics (default 9464;
   * 0 picks a free port). A process with the api role serves it on PORT.
   */
  readonly metricsPort: number;
  /** OpenTelemetry tracing, set when OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is, and OTEL_SDK_DISABLED is not true. */
  readonly tracing: TracingSettings | undefined;
}

/** What every connection and request to the gateway (PORT) and the core (GRPC_PORT) may take. */
export interface EdgeLimits {
  /** HTTP_HEADERS_TIMEOUT: a request's headers must have arrived within this. */
  readonly headersTimeoutMs: number;
  /** HTTP_REQUEST_TIMEOUT: a whole request (headers and body) must have arrived within this. */
  readonly requestTimeoutMs: number;
  /** HTTP_IDLE_TIMEOUT: a connection (or HTTP/2 session) with no traffic at all for this long is closed. */
  readonly idleTimeoutMs: number;
  /** HTTP_KEEP_ALIVE_TIMEOUT: how long an HTTP/1.1 connection waits for its next request. */
  readonly keepAliveTimeoutMs: number;
  /** MAX_CONNECTIONS: open connections per port, all clients together. */
  readonly maxConnections: number;
  /** MAX_CONNECTIONS_PER_CLIENT: open connections per port from one client address. */
  readonly maxConnectionsPerClient: number;
  /** MAX_BODY_BYTES: the body (or RPC message) of every call that carries no input images. */
  readonly maxBodyBytes: number;
  /** LARGE_UPLOAD_BYTES: a body above this counts as a large upload. */
  readonly largeUploadBytes: number;
  /** MAX_CONCURRENT_LARGE_UPLOADS: large uploads read at once per process; beyond it 429 with Retry-After. */
  readonly maxConcurrentLargeUploads: number;
  /** MAX_BODY_MEMORY: bytes of request bodies being received at once per process, both ports, every body counted. */
  readonly maxBodyMemory: number;
  /** GRPC_MAX_CONCURRENT_STREAMS: calls at once on one HTTP/2 connection to the core. */
  readonly maxConcurrentStreams: number;
  /** MAX_PIPELINED_REQUESTS: requests of one HTTP/1.1 connection answered at once; those behind wait and the connection is not read. */
  readonly maxPipelinedRequests: number;
}

export type Role = "api" | "worker" | "webhooks";
export const ROLES: readonly Role[] = ["api", "worker", "webhooks"];

export interface CassandraConfig {
  readonly contactPoints: readonly string[];
  readonly keyspace: string;
  readonly localDataCenter: string;
  /** CQL replication map used when the keyspace is created. */
  readonly replication: string;
}

export interface KafkaConfig {
  readonly brokers: readonly string[];
  readonly topicPrefix: string;
  readonly partitions: number;
}

function roles(raw: string | undefined): Set<Role> {
  if (!raw || raw === "all") return new Set(ROLES);
  const list = raw.split(",").map((r) => r.trim());
  for (const role of list) {
    if (!ROLES.includes(role as Role)) throw new Error(`ROLE must be all or a list of ${ROLES.join(", ")} (got "${raw}")`);
  }
  return new Set(list as Role[]);
}

const list = (raw: string | undefined) => (raw ?? "").split(",").map((s) => s.trim()).filter(Boolean);

/**
 * CORS_ORIGINS: exact origins, as a browser sends them in `Origin`
 * (`https://app.example.com`, `http://localhost:5173`): http or https, no
 * path, no trailing slash, the default port left out. `*` is refused: which
 * web apps may hold and use keys and the admin token from a browser is a
 * decision to name, not to leave open.
 */
function corsOrigins(raw: string | undefined): string[] {
  const origins = list(raw);
  for (const entry of origins) {
    if (entry === "*") throw new Error("CORS_ORIGINS: \"*\" is not allowed; list the origins of your web apps (e.g. https://app.example.com)");
    let origin: string | undefined;
    try {
      const url = new URL(entry);
      if (url.protocol === "http:" || url.protocol === "https:") origin = url.origin;
    } catch {
      origin = undefined;
    }
    if (origin !== entry) {
      const hint = origin ? ` (did you mean "${origin}"?)` : "";
      throw new Error(`CORS_ORIGINS: "${entry}" is not an origin: scheme://host[:port], http or https, no path or trailing slash${hint}`);
    }
  }
  return [...new Set(origins)];
}

const DURATION = /^(\d+)(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(text: string): number {
  const match = DURATION.exec(text.trim());
  if (!match) throw new Error(`"${text}" is not a duration such as 500ms, 5s, 30m, 2h or 30d`);
  return Number(match[1]) * UNIT_MS[match[2]!]!;
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer ≥ ${min} (got "${raw}")`);
  return value;
}

function bytes(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 1): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const match = /^(\d+)(|B|KiB|MiB|GiB)$/.exec(raw.trim());
  const value = match ? Number(match[1]) * ({ "": 1, B: 1, KiB: KIB, MiB: MIB, GiB: 1024 * MIB } as Record<string, number>)[match[2]!]! : NaN;
  if (!Number.isSafeInteger(value) || value < min) throw new Error(`${name} must be a size such as 4096, 64KiB or 2MiB, at least ${min} bytes (got "${raw}")`);
  return value;
}

function oneOf<T extends string>(env: NodeJS.ProcessEnv, name: string, allowed: readonly T[], fallback: T): T {
  const raw = (env[name] ?? "").toLowerCase();
  if (raw === "") return fallback;
  if (!allowed.includes(raw as T)) throw new Error(`${name} must be one of ${allowed.join(", ")} (got "${raw}")`);
  return raw as T;
}

/** Cassandra caps a TTL at 20 years. */
const MAX_RETENTION_MS = 20 * 365 * 86_400_000;

function retention(env: NodeJS.ProcessEnv): number {
  const ms = parseDuration(env.JOB_RETENTION || "30d");
  if (ms < 1000 || ms > MAX_RETENTION_MS) throw new Error(`JOB_RETENTION must be between 1s and 20 years (got "${env.JOB_RETENTION}")`);
  return ms;
}

/** proxy-addr's names for address ranges, as TRUST_PROXY may use them. */
const PROXY_RANGE_NAMES = new Set(["loopback", "linklocal", "uniquelocal"]);

/**
 * TRUST_PROXY: "false"/unset, "true", or comma-separated proxy addresses, CIDRs and range names. A hop count is refused:
 * Fastify 5 trusts no one for a number (it cannot check the peer), which would silently leave the cookie without Secure.
 */
function trustProxy(env: NodeJS.ProcessEnv): boolean | readonly string[] {
  const raw = (env.TRUST_PROXY ?? "").trim();
  if (raw === "" || raw.toLowerCase() === "false") return false;
  if (raw.toLowerCase() === "true") return true;
  const entries = list(raw);
  for (const entry of entries) {
    if (PROXY_RANGE_NAMES.has(entry)) continue;
    // Dotted quads only: ipaddr would read "2" as 0.0.0.2, and a hop count must not pass for an address.
    const address = entry.split("/")[0]!;
    const strict = ipaddr.IPv4.isValidFourPartDecimal(address) || ipaddr.IPv6.isValid(address);
    if (strict && (entry.includes("/") ? ipaddr.isValidCIDR(entry) : true)) continue;
    throw new Error(
      `TRUST_PROXY must be true, false, or comma-separated proxy addresses, CIDRs, loopback, linklocal or uniquelocal (got "${entry}"; a hop count is not supported)`,
    );
  }
  return entries;
}

function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = (env[name] ?? "").toLowerCase();
  if (raw === "" || raw === "false" || raw === "0") return false;
  if (raw === "true" || raw === "1") return true;
  throw new Error(`${name} must be true or false (got "${raw}")`);
}

/** An admin token shorter than this is guessable at the rates a client reaches (ALLOW_WEAK_ADMIN_TOKEN waives it for development). */
export const MIN_ADMIN_TOKEN_LENGTH = 32;

/** ADMIN_TOKEN, or a random one for this run (36 characters, 144 random bits). */
function adminTokenOf(env: NodeJS.ProcessEnv): string {
  const given = env.ADMIN_TOKEN;
  if (!given) return `adm_${randomBytes(24).toString("base64url")}`;
  if (given.length < MIN_ADMIN_TOKEN_LENGTH && !flag(env, "ALLOW_WEAK_ADMIN_TOKEN")) {
    throw new Error(
      `ADMIN_TOKEN must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters (got ${given.length}); make one with \`openssl rand -hex 32\`` +
      ", or set ALLOW_WEAK_ADMIN_TOKEN=true for development",
    );
  }
  return given;
}

/** VENDOR_BASE_URL + VENDOR_API_KEY: every model to one upstream; ROUTES_FILE: the full table. */
function loadRoutes(env: NodeJS.ProcessEnv, maxInputImages: number): Route[] | undefined {
  const timeoutMs = parseDuration(env.UPSTREAM_TIMEOUT || "120s");
  if (env.ROUTES_FILE) {
    const file = JSON.parse(readFileSync(env.ROUTES_FILE, "utf8")) as RoutesFile;
    const routes = parseRoutesFile(file, { timeoutMs, maxInputImages }, env);
    for (const route of routes) {
      for (const model of route.models) {
        if (model !== "*" && findModel(model)?.id !== model) throw new Error(`ROUTES_FILE: route ${route.name} names an unknown model "${model}"`);
      }
    }
    return routes;
  }
  if (!env.VENDOR_BASE_URL) return undefined;
  if (!env.VENDOR_API_KEY) throw new Error("VENDOR_BASE_URL is set: VENDOR_API_KEY is required too");
  return parseRoutesFile(
    { routes: [{ name: "vendor", base_url: env.VENDOR_BASE_URL, api_key: env.VENDOR_API_KEY }] },
    { timeoutMs, maxInputImages },
    env,
  );
}

const DEFAULT_PRICES = join(dirname(fileURLToPath(import.meta.url)), "default-prices.json");

/** The URL-signing key persists in DATA_DIR so result links survive a restart. */
function signingSecret(env: NodeJS.ProcessEnv, dataDir: string): Buffer {
  if (env.URL_SIGNING_SECRET) return Buffer.from(env.URL_SIGNING_SECRET, "utf8");
  const path = join(dataDir, "url-signing.key");
  try {
    return Buffer.from(readFileSync(path, "utf8").trim(), "hex");
  } catch {
    const secret = randomBytes(32);
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(path, secret.toString("hex"), { mode: 0o600 });
    return secret;
  }
}

/** The standard OpenTelemetry variables (OTEL_EXPORTER_OTLP_ENDPOINT and friends) that turn tracing on. */
function tracing(env: NodeJS.ProcessEnv, roles: ReadonlySet<Role>): TracingSettings | undefined {
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const tracesEndpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || undefined;
  if ((!endpoint && !tracesEndpoint) || env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  // OTEL_EXPORTER_OTLP_HEADERS: comma-separated key=value pairs, values URL-encoded (the OTel specification's format).
  const headers: Record<string, string> = {};
  for (const pair of list(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS || env.OTEL_EXPORTER_OTLP_HEADERS)) {
    const at = pair.indexOf("=");
    if (at > 0) headers[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
  }
  const serviceName = env.OTEL_SERVICE_NAME?.trim() || (roles.size === ROLES.length ? "generation-service" : `generation-service-${[...roles].join("-")}`);
  return { endpoint: endpoint ?? "", tracesEndpoint, serviceName, headers };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const dataDir = resolve(env.DATA_DIR || "data");
  const pricesFile = env.PRICES_FILE || DEFAULT_PRICES;
  const prices = parsePriceTable(JSON.parse(readFileSync(pricesFile, "utf8")) as Record<string, ModelPricesText>);
  const adminToken = adminTokenOf(env);
  const cassandraPoints = list(env.CASSANDRA_CONTACT_POINTS);
  const kafkaBrokers = list(env.KAFKA_BROKERS);
  const processRoles = roles(env.ROLE);
  const maxInputImages = integer(env, "MAX_INPUT_IMAGES", DEFAULT_LIMITS.maxInputImages, 1);
  const maxInputBytes = bytes(env, "MAX_INPUT_BYTES", DEFAULT_LIMITS.maxInputBytes);
  const defaults = DEFAULT_LIMITS;
  const workerId = env.WORKER_ID || `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
  if (processRoles.size < ROLES.length && (cassandraPoints.length === 0 || kafkaBrokers.length === 0)) {
    throw new Error("running a single ROLE needs shared state: set CASSANDRA_CONTACT_POINTS and KAFKA_BROKERS");
  }
  return Object.freeze({
    host: env.HOST || "127.0.0.1",
    port: integer(env, "PORT", 8080),
    grpcPort: integer(env, "GRPC_PORT", 8081),
    adminToken,
    adminTokenGenerated: !env.ADMIN_TOKEN,
    authFailures: {
      limit: integer(env, "AUTH_FAILURE_LIMIT", 20, 1),
      windowMs: Math.max(1, parseDuration(env.AUTH_FAILURE_WINDOW || "1m")),
      maxClients: 100_000,
    },
    publicBaseUrl: env.PUBLIC_BASE_URL?.replace(/\/+$/, "") || undefined,
    trustProxy: trustProxy(env),
    allowPrivateUrls: flag(env, "ALLOW_PRIVATE_URLS"),
    simulatedLatencyMs: integer(env, "SIMULATED_LATENCY_MS", 500),
    simulatedRenderThreads: integer(env, "SIMULATED_RENDER_THREADS", 1),
    dataDir,
    resultUrlTtlSeconds: integer(env, "RESULT_URL_TTL_SECONDS", 86_400, 1),
    urlSigningSecret: signingSecret(env, dataDir),
    webhookRetryScheduleMs: (env.WEBHOOK_RETRY_SCHEDULE || "5s,5m,30m,2h,5h,10h").split(",").map(parseDuration),
    webhookTimeoutMs: parseDuration(env.WEBHOOK_TIMEOUT || "15s"),
    webhookFairness: {
      maxPerDestination: integer(env, "WEBHOOK_MAX_PER_DESTINATION", 4, 1),
      maxPerAccount: integer(env, "WEBHOOK_MAX_PER_ACCOUNT", 16, 1),
      maxInFlight: integer(env, "WEBHOOK_MAX_IN_FLIGHT", 256, 1),
      breakerFailures: integer(env, "WEBHOOK_BREAKER_FAILURES", 5, 1),
      breakerOpenMs: Math.max(100, parseDuration(env.WEBHOOK_BREAKER_OPEN || "30s")),
      breakerMaxOpenMs: Math.max(100, parseDuration(env.WEBHOOK_BREAKER_MAX_OPEN || "10m")),
      deferMs: Math.max(10, parseDuration(env.WEBHOOK_DEFER || "1s")),
    },
    maxInputImages,
    maxInputBytes,
    limits: {
      maxInputImages,
      maxInputBytes,
      maxPromptBytes: {
        image: bytes(env, "MAX_PROMPT_BYTES_IMAGE", defaults.maxPromptBytes.image),
        video: bytes(env, "MAX_PROMPT_BYTES_VIDEO", defaults.maxPromptBytes.video),
        text: bytes(env, "MAX_PROMPT_BYTES_TEXT", defaults.maxPromptBytes.text),
      },
      metadata: {
        maxKeys: integer(env, "MAX_METADATA_KEYS", defaults.metadata.maxKeys, 0),
        maxKeyBytes: bytes(env, "MAX_METADATA_KEY_BYTES", defaults.metadata.maxKeyBytes),
        maxValueBytes: bytes(env, "MAX_METADATA_VALUE_BYTES", defaults.metadata.maxValueBytes),
        maxTotalBytes: bytes(env, "MAX_METADATA_BYTES", defaults.metadata.maxTotalBytes),
      },
    },
    edge: {
      headersTimeoutMs: Math.max(100, parseDuration(env.HTTP_HEADERS_TIMEOUT || "10s")),
      requestTimeoutMs: Math.max(100, parseDuration(env.HTTP_REQUEST_TIMEOUT || "60s")),
      idleTimeoutMs: Math.max(100, parseDuration(env.HTTP_IDLE_TIMEOUT || "30s")),
      keepAliveTimeoutMs: Math.max(100, parseDuration(env.HTTP_KEEP_ALIVE_TIMEOUT || "5s")),
      maxConnections: integer(env, "MAX_CONNECTIONS", 10_000, 1),
      maxConnectionsPerClient: integer(env, "MAX_CONNECTIONS_PER_CLIENT", 256, 1),
      maxBodyBytes: bytes(env, "MAX_BODY_BYTES", 1 * MIB),
      largeUploadBytes: bytes(env, "LARGE_UPLOAD_BYTES", 1 * MIB),
      maxConcurrentLargeUploads: integer(env, "MAX_CONCURRENT_LARGE_UPLOADS", 4, 1),
      maxConcurrentStreams: integer(env, "GRPC_MAX_CONCURRENT_STREAMS", 100, 1),
      maxBodyMemory: bytes(env, "MAX_BODY_MEMORY", 512 * MIB),
      maxPipelinedRequests: integer(env, "MAX_PIPELINED_REQUESTS", 8, 1),
    },
    maxQueuedJobsPerAccount: integer(env, "MAX_QUEUED_JOBS_PER_ACCOUNT", 1000, 1),
    idempotencyTtlMs: parseDuration(env.IDEMPOTENCY_TTL || "24h"),
    prices,
    coreUrl: env.CORE_URL || undefined,
    corsOrigins: corsOrigins(env.CORS_ORIGINS),
    logLevel: env.LOG_LEVEL || "info",
    metricsPort: integer(env, "METRICS_PORT", 9464, 0),
    tracing: tracing(env, processRoles),
    retryAfterSeconds: integer(env, "RETRY_AFTER_SECONDS", 30, 1),
    roles: processRoles,
    cassandra: cassandraPoints.length
      ? {
          contactPoints: cassandraPoints,
          keyspace: env.CASSANDRA_KEYSPACE || "generation",
          localDataCenter: env.CASSANDRA_LOCAL_DC || "datacenter1",
          replication: env.CASSANDRA_REPLICATION || "{'class': 'SimpleStrategy', 'replication_factor': 1}",
        }
      : undefined,
    kafka: kafkaBrokers.length
      ? { brokers: kafkaBrokers, topicPrefix: env.KAFKA_TOPIC_PREFIX ?? "", partitions: integer(env, "KAFKA_PARTITIONS", 6, 1) }
      : undefined,
    worker: {
      workerId,
      leaseMs: parseDuration(env.JOB_LEASE || "30s"),
      concurrency: integer(env, "WORKER_CONCURRENCY", 8, 1),
      reaperIntervalMs: parseDuration(env.REAPER_INTERVAL || "5s"),
      requeueAfterMs: parseDuration(env.REQUEUE_AFTER || "60s"),
      textCallLimitMs: parseDuration(env.TEXT_CALL_LIMIT || "1h"),
    },
    shutdownGraceMs: parseDuration(env.SHUTDOWN_GRACE || "20s"),
    routes: loadRoutes(env, maxInputImages),
    upstreamPollMs: parseDuration(env.UPSTREAM_POLL_INTERVAL || "1s"),
    upstreamVideoMaxBytes: bytes(env, "UPSTREAM_VIDEO_MAX_BYTES", 512 * MIB),
    inputFetchTimeoutMs: Math.max(100, parseDuration(env.INPUT_FETCH_TIMEOUT || "30s")),
    embeddedStore: oneOf(env, "EMBEDDED_STORE", ["sqlite", "memory"] as const, "sqlite"),
    sqliteSynchronous: oneOf(env, "SQLITE_SYNCHRONOUS", ["normal", "full", "extra"] as const, "full"),
    jobRetentionMs: retention(env),
    retentionSweepMs: parseDuration(env.RETENTION_SWEEP_INTERVAL || "1h"),
    acceptTimeoutMs: parseDuration(env.ACCEPT_TIMEOUT || "15s"),
    drainDelayMs: parseDuration(env.DRAIN_DELAY || "5s"),
    dependencyCheckMs: Math.max(100, parseDuration(env.DEPENDENCY_CHECK_INTERVAL || "1s")),
    publishTimeoutMs: Math.max(100, parseDuration(env.PUBLISH_TIMEOUT || "3s")),
    cancelGraceMs: Math.max(100, parseDuration(env.CANCEL_GRACE || "5s")),
    watchFallbackMs: Math.max(100, parseDuration(env.WATCH_FALLBACK || "15s")),
    sseKeepAliveMs: Math.max(100, parseDuration(env.SSE_KEEPALIVE || "15s")),
  });
}
