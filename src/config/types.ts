/*
 * The configuration's types. Config imports nothing of the service's own: where a field's type is the core's or an
 * adapter's (WorkerOptions, WebhookFairness, TracingSettings, FailureBudget, ValidationLimits), an identical type is
 * declared here, and test/config/config-schema.test.ts checks each against its original both ways.
 */

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
  /** URL_SIGNING_SECRET as given; unset, the runtime reads (or makes) DATA_DIR/url-signing.key at start (src/runtime/settings.ts). */
  readonly urlSigningSecret: Buffer | undefined;
  readonly webhookRetryScheduleMs: readonly number[];
  readonly webhookTimeoutMs: number;
  /** Per-destination and per-account limits of webhook requests, and the breaker per destination (issue 34). */
  readonly webhookFairness: WebhookFairness;
  readonly maxInputImages: number;
  readonly maxInputBytes: number;
  /** Prompt and metadata limits (and the two above), as validation enforces them. */
  readonly limits: ValidationLimits;
  /** SAFETY_MIN_THRESHOLDS: the minimum threshold per harm category. */
  readonly safetyMinimums: Readonly<Record<string, string>>;
  /** Timeouts, sizes and connection caps of both listening ports. */
  readonly edge: EdgeLimits;
  /** Jobs of one account accepted and not yet finished; beyond it 429 with Retry-After. */
  readonly maxQueuedJobsPerAccount: number;
  readonly idempotencyTtlMs: number;
  /** PRICES_FILE: the initial price table's path; the runtime reads it at start. */
  readonly pricesFile: string;
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
  /** ROUTES_FILE: the route table's path; the runtime reads it at start. It takes precedence over `vendor`. */
  readonly routesFile: string | undefined;
  /** VENDOR_BASE_URL and VENDOR_API_KEY: every model to one upstream. Neither this nor `routesFile`: the simulated provider. */
  readonly vendor: { readonly baseUrl: string; readonly apiKey: string } | undefined;
  /** UPSTREAM_TIMEOUT: a route's bound of one upstream call when the route sets none. */
  readonly upstreamTimeoutMs: number;
  /** The environment as it was read: a route's `api_key_env` names a variable of it. */
  readonly environment: Readonly<Record<string, string | undefined>>;
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
  /** How the keyspace is replicated when the service creates it (CASSANDRA_REPLICATION_STRATEGY, _FACTOR). */
  readonly replication: { readonly strategy: "NetworkTopologyStrategy" | "SimpleStrategy"; readonly factor: number };
  /** CASSANDRA_CONSISTENCY: every statement's level. */
  readonly consistency: "LOCAL_QUORUM" | "QUORUM" | "ALL";
  /** CASSANDRA_SERIAL_CONSISTENCY: the lightweight transactions' level. */
  readonly serialConsistency: "LOCAL_SERIAL" | "SERIAL";
  /** CASSANDRA_SPECULATIVE_READ_DELAY: when a read is sent to a second node too. */
  readonly speculativeReadDelayMs: number;
}

export interface KafkaConfig {
  readonly brokers: readonly string[];
  readonly topicPrefix: string;
  readonly partitions: number;
  /** KAFKA_SESSION_TIMEOUT: every consumer group member's session timeout. */
  readonly sessionTimeoutMs: number;
  /** KAFKA_RETRIES: retries of one client operation before it fails. */
  readonly retries: number;
  /** KAFKA_REPLICATION_FACTOR, KAFKA_MIN_INSYNC_REPLICAS: the replication of the topics the service creates. */
  readonly replication: { readonly factor: number; readonly minInsyncReplicas: number };
  /** KAFKA_ACKS: what a publish of the event bus waits for, -1 (all) or 1 (the leader). */
  readonly acks: -1 | 1;
}


/** WORKER_ID, JOB_LEASE, WORKER_CONCURRENCY, …: as the generation worker takes them (the core's WorkerOptions). */
export interface WorkerOptions {
  /** Identifies this worker in job leases. */
  readonly workerId: string;
  /** How long a lease lasts without a heartbeat; a dead worker's jobs are taken over after it. */
  readonly leaseMs: number;
  /** Jobs generated at once by this worker. */
  readonly concurrency: number;
  /** How often the reaper looks for abandoned work. */
  readonly reaperIntervalMs: number;
  /** A queued job older than this is announced again; an acceptance that left no job after this long is undone. */
  readonly requeueAfterMs: number;
  /** No synchronous text call lives longer: an older call's hold was left by a dead process and is released. */
  readonly textCallLimitMs: number;
}

/** WEBHOOK_MAX_*, WEBHOOK_BREAKER_*, WEBHOOK_DEFER: the core's WebhookFairness (its delivery gate's settings but the probe's). */
export interface WebhookFairness {
  readonly maxPerDestination: number;
  readonly maxPerAccount: number;
  readonly maxInFlight: number;
  readonly breakerFailures: number;
  readonly breakerOpenMs: number;
  readonly breakerMaxOpenMs: number;
  readonly deferMs: number;
}

/** The OTEL_* variables, as the tracing adapter takes them (its TracingSettings). */
export interface TracingSettings {
  /** OTEL_EXPORTER_OTLP_ENDPOINT: the collector's base URL. */
  readonly endpoint: string;
  /** OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: the full URL of the traces endpoint, when it is not `<endpoint>/v1/traces`. */
  readonly tracesEndpoint?: string;
  /** OTEL_SERVICE_NAME, or generation-service-<roles>. */
  readonly serviceName: string;
  /** OTEL_EXPORTER_OTLP_(TRACES_)HEADERS. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** AUTH_FAILURE_LIMIT per AUTH_FAILURE_WINDOW, as the domain's FailureBudget. */
export interface FailureBudget {
  readonly limit: number;
  readonly windowMs: number;
  /** Clients remembered at once. */
  readonly maxClients: number;
}

/** MAX_INPUT_*, MAX_PROMPT_BYTES_*, MAX_METADATA_*: the domain's ValidationLimits. */
export interface ValidationLimits {
  readonly maxInputImages: number;
  readonly maxInputBytes: number;
  readonly maxPromptBytes: { readonly image: number; readonly video: number; readonly text: number };
  readonly metadata: { readonly maxKeys: number; readonly maxKeyBytes: number; readonly maxValueBytes: number; readonly maxTotalBytes: number };
}
