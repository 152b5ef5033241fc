import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { ConfigError } from "./parsers.js";
import { ENVIRONMENT, type Environment } from "./schema.js";
import { ROLES, type CassandraConfig, type Config, type EdgeLimits, type Role, type TracingSettings } from "./types.js";

export * from "./types.js";
export { ConfigError, parseDuration } from "./parsers.js";

/*
 * The configuration: the environment read through one schema (schema.ts), once at boot, and frozen. Nothing else
 * reads process.env. Config reads the environment and nothing else: the files it names (PRICES_FILE, ROUTES_FILE, the
 * URL-signing key in DATA_DIR) are read by the runtime at start (src/runtime/settings.ts).
 */

/** An admin token shorter than this is guessable at the rates a client reaches (ALLOW_WEAK_ADMIN_TOKEN waives it for development). */
export const MIN_ADMIN_TOKEN_LENGTH = 32;

/** Each variable read through the schema; every refused value is named, in the schema's order. */
export function readEnvironment(env: Readonly<Record<string, string | undefined>>): Environment {
  const result = ENVIRONMENT.safeParse(env);
  if (!result.success) throw new ConfigError(result.error.issues.map((issue) => issue.message).join("; "));
  return result.data as unknown as Environment;
}

/** ADMIN_TOKEN, or a random one for this run (36 characters, 144 random bits). */
function adminTokenOf(e: Environment): string {
  const given = e.ADMIN_TOKEN;
  if (!given) return `adm_${randomBytes(24).toString("base64url")}`;
  if (given.length < MIN_ADMIN_TOKEN_LENGTH && !e.ALLOW_WEAK_ADMIN_TOKEN) {
    throw new ConfigError(
      `ADMIN_TOKEN must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters (got ${given.length}); make one with \`openssl rand -hex 32\`` +
      ", or set ALLOW_WEAK_ADMIN_TOKEN=true for development",
    );
  }
  return given;
}

function cassandraOf(e: Environment): CassandraConfig | undefined {
  if (e.CASSANDRA_CONTACT_POINTS.length === 0) return undefined;
  return {
    contactPoints: e.CASSANDRA_CONTACT_POINTS,
    keyspace: e.CASSANDRA_KEYSPACE,
    localDataCenter: e.CASSANDRA_LOCAL_DC,
    replication: { strategy: e.CASSANDRA_REPLICATION_STRATEGY, factor: e.CASSANDRA_REPLICATION_FACTOR },
    consistency: e.CASSANDRA_CONSISTENCY,
    serialConsistency: e.CASSANDRA_SERIAL_CONSISTENCY,
    speculativeReadDelayMs: e.CASSANDRA_SPECULATIVE_READ_DELAY,
  };
}

/** The standard OpenTelemetry variables (OTEL_EXPORTER_OTLP_ENDPOINT and friends) that turn tracing on. */
function tracingOf(e: Environment, roles: ReadonlySet<Role>): TracingSettings | undefined {
  const endpoint = e.OTEL_EXPORTER_OTLP_ENDPOINT;
  const tracesEndpoint = e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if ((!endpoint && !tracesEndpoint) || e.OTEL_SDK_DISABLED) return undefined;
  const headers = e.OTEL_EXPORTER_OTLP_TRACES_HEADERS ?? e.OTEL_EXPORTER_OTLP_HEADERS ?? {};
  const serviceName = e.OTEL_SERVICE_NAME ?? (roles.size === ROLES.length ? "generation-service" : `generation-service-${[...roles].join("-")}`);
  return { endpoint: endpoint ?? "", tracesEndpoint, serviceName, headers };
}

/** The edge's limits (both ports) from the variables read. */
export function edgeLimitsOf(e: Environment): EdgeLimits {
  return {
    headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT,
    requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT,
    idleTimeoutMs: e.HTTP_IDLE_TIMEOUT,
    keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT,
    maxConnections: e.MAX_CONNECTIONS,
    maxConnectionsPerClient: e.MAX_CONNECTIONS_PER_CLIENT,
    maxBodyBytes: e.MAX_BODY_BYTES,
    largeUploadBytes: e.LARGE_UPLOAD_BYTES,
    maxConcurrentLargeUploads: e.MAX_CONCURRENT_LARGE_UPLOADS,
    maxConcurrentStreams: e.GRPC_MAX_CONCURRENT_STREAMS,
    maxBodyMemory: e.MAX_BODY_MEMORY,
    maxPipelinedRequests: e.MAX_PIPELINED_REQUESTS,
  };
}

/** The rules that join several variables; each refusal names them. */
function checkTogether(e: Environment): void {
  if (e.ROLE.size < ROLES.length && (e.CASSANDRA_CONTACT_POINTS.length === 0 || e.KAFKA_BROKERS.length === 0)) {
    throw new ConfigError("running a single ROLE needs shared state: set CASSANDRA_CONTACT_POINTS and KAFKA_BROKERS");
  }
  if (e.KAFKA_MIN_INSYNC_REPLICAS > e.KAFKA_REPLICATION_FACTOR) {
    throw new ConfigError(
      `KAFKA_MIN_INSYNC_REPLICAS (${e.KAFKA_MIN_INSYNC_REPLICAS}) must be at most KAFKA_REPLICATION_FACTOR (${e.KAFKA_REPLICATION_FACTOR}): ` +
        "no publish could be acknowledged",
    );
  }
  if (!e.ROUTES_FILE && e.VENDOR_BASE_URL && !e.VENDOR_API_KEY) throw new ConfigError("VENDOR_BASE_URL is set: VENDOR_API_KEY is required too");
}

/** The Config of an environment: its variables read through the schema, defaults for the unset ones; frozen. */
export function configFrom(env: Readonly<Record<string, string | undefined>>): Config {
  const e = readEnvironment(env);
  const adminToken = adminTokenOf(e);
  checkTogether(e);
  const workerId = e.WORKER_ID ?? `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
  const limits = {
    maxInputImages: e.MAX_INPUT_IMAGES,
    maxInputBytes: e.MAX_INPUT_BYTES,
    maxPromptBytes: { image: e.MAX_PROMPT_BYTES_IMAGE, video: e.MAX_PROMPT_BYTES_VIDEO, text: e.MAX_PROMPT_BYTES_TEXT },
    metadata: {
      maxKeys: e.MAX_METADATA_KEYS, maxKeyBytes: e.MAX_METADATA_KEY_BYTES, maxValueBytes: e.MAX_METADATA_VALUE_BYTES, maxTotalBytes: e.MAX_METADATA_BYTES,
    },
  };
  return Object.freeze({
    host: e.HOST,
    port: e.PORT,
    grpcPort: e.GRPC_PORT,
    adminToken,
    adminTokenGenerated: !e.ADMIN_TOKEN,
    authFailures: { limit: e.AUTH_FAILURE_LIMIT, windowMs: e.AUTH_FAILURE_WINDOW, maxClients: 100_000 },
    publicBaseUrl: e.PUBLIC_BASE_URL,
    trustProxy: e.TRUST_PROXY,
    allowPrivateUrls: e.ALLOW_PRIVATE_URLS,
    simulatedLatencyMs: e.SIMULATED_LATENCY_MS,
    simulatedRenderThreads: e.SIMULATED_RENDER_THREADS,
    dataDir: e.DATA_DIR,
    resultUrlTtlSeconds: e.RESULT_URL_TTL_SECONDS,
    urlSigningSecret: e.URL_SIGNING_SECRET,
    webhookRetryScheduleMs: e.WEBHOOK_RETRY_SCHEDULE,
    webhookTimeoutMs: e.WEBHOOK_TIMEOUT,
    webhookFairness: {
      maxPerDestination: e.WEBHOOK_MAX_PER_DESTINATION,
      maxPerAccount: e.WEBHOOK_MAX_PER_ACCOUNT,
      maxInFlight: e.WEBHOOK_MAX_IN_FLIGHT,
      breakerFailures: e.WEBHOOK_BREAKER_FAILURES,
      breakerOpenMs: e.WEBHOOK_BREAKER_OPEN,
      breakerMaxOpenMs: e.WEBHOOK_BREAKER_MAX_OPEN,
      deferMs: e.WEBHOOK_DEFER,
    },
    maxInputImages: limits.maxInputImages,
    maxInputBytes: limits.maxInputBytes,
    limits,
    safetyMinimums: e.SAFETY_MIN_THRESHOLDS ?? {},
    edge: edgeLimitsOf(e),
    maxQueuedJobsPerAccount: e.MAX_QUEUED_JOBS_PER_ACCOUNT,
    idempotencyTtlMs: e.IDEMPOTENCY_TTL,
    pricesFile: e.PRICES_FILE,
    coreUrl: e.CORE_URL,
    corsOrigins: e.CORS_ORIGINS,
    logLevel: e.LOG_LEVEL,
    metricsPort: e.METRICS_PORT,
    tracing: tracingOf(e, e.ROLE),
    retryAfterSeconds: e.RETRY_AFTER_SECONDS,
    roles: e.ROLE,
    cassandra: cassandraOf(e),
    kafka: e.KAFKA_BROKERS.length ? {
      brokers: e.KAFKA_BROKERS, topicPrefix: e.KAFKA_TOPIC_PREFIX, partitions: e.KAFKA_PARTITIONS,
      sessionTimeoutMs: e.KAFKA_SESSION_TIMEOUT, retries: e.KAFKA_RETRIES,
      replication: { factor: e.KAFKA_REPLICATION_FACTOR, minInsyncReplicas: e.KAFKA_MIN_INSYNC_REPLICAS },
      acks: e.KAFKA_ACKS === "all" ? (-1 as const) : (1 as const),
    } : undefined,
    worker: {
      workerId,
      leaseMs: e.JOB_LEASE,
      concurrency: e.WORKER_CONCURRENCY,
      reaperIntervalMs: e.REAPER_INTERVAL,
      requeueAfterMs: e.REQUEUE_AFTER,
      textCallLimitMs: e.TEXT_CALL_LIMIT,
    },
    shutdownGraceMs: e.SHUTDOWN_GRACE,
    routesFile: e.ROUTES_FILE,
    vendor: e.VENDOR_BASE_URL && e.VENDOR_API_KEY ? { baseUrl: e.VENDOR_BASE_URL, apiKey: e.VENDOR_API_KEY } : undefined,
    upstreamTimeoutMs: e.UPSTREAM_TIMEOUT,
    environment: Object.freeze({ ...env }),
    upstreamPollMs: e.UPSTREAM_POLL_INTERVAL,
    upstreamVideoMaxBytes: e.UPSTREAM_VIDEO_MAX_BYTES,
    inputFetchTimeoutMs: e.INPUT_FETCH_TIMEOUT,
    embeddedStore: e.EMBEDDED_STORE,
    sqliteSynchronous: e.SQLITE_SYNCHRONOUS,
    jobRetentionMs: e.JOB_RETENTION,
    retentionSweepMs: e.RETENTION_SWEEP_INTERVAL,
    acceptTimeoutMs: e.ACCEPT_TIMEOUT,
    drainDelayMs: e.DRAIN_DELAY,
    dependencyCheckMs: e.DEPENDENCY_CHECK_INTERVAL,
    publishTimeoutMs: e.PUBLISH_TIMEOUT,
    cancelGraceMs: e.CANCEL_GRACE,
    watchFallbackMs: e.WATCH_FALLBACK,
    sseKeepAliveMs: e.SSE_KEEPALIVE,
  });
}

/** The process's configuration: process.env read through the schema. */
export function loadConfig(env: Readonly<Record<string, string | undefined>> = process.env): Config {
  return configFrom(env);
}

/** The configuration with no variable set: every default of the schema (tests start from it). */
export function defaultConfig(): Config {
  return configFrom({});
}

/** The edge's limits when no variable sets them: the schema's defaults (listenRpc's when it is given none). */
export const DEFAULT_EDGE_LIMITS: EdgeLimits = Object.freeze(edgeLimitsOf(readEnvironment({})));
