import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigError, corsOrigins, duration, list, otlpHeaders, parseDuration, roles, trustProxy } from "./parsers.js";
import {
  bool, bytes, choice, environmentSchema, int, maybeText, optional, text, time, variable, type Variable,
} from "./variables.js";

/*
 * Every environment variable the service reads, in one schema: its name, the syntax of its value, its default and
 * bound, and its description. The frozen Config is made from it (config.ts), and so is the configuration
 * table (`npm run docs:config`, between its config-table markers; test/config/config-table.test.ts fails when they
 * differ) and the defaults tests start from (defaultConfig, DEFAULT_EDGE_LIMITS). Rows of the table are in this order.
 */

/** The initial price table shipped beside this module (copied beside the compiled one by infra/copy-assets.mjs). */
const DEFAULT_PRICES_FILE = join(dirname(fileURLToPath(import.meta.url)), "default-prices.json");

/** Cassandra caps a TTL at 20 years. */
const MAX_RETENTION_MS = 20 * 365 * 86_400_000;

function retention(value: string, name: string): number {
  const ms = duration(value, name);
  if (ms < 1000 || ms > MAX_RETENTION_MS) throw new ConfigError(`${name} must be between 1s and 20 years (got "${value}")`);
  return ms;
}

/** The vendor's safety thresholds, loosest first (the domain's HARM_BLOCK_THRESHOLDS; a test checks they are equal). */
export const SAFETY_THRESHOLDS = [
  "HARM_BLOCK_THRESHOLD_UNSPECIFIED", "OFF", "BLOCK_NONE", "BLOCK_ONLY_HIGH", "BLOCK_MEDIUM_AND_ABOVE", "BLOCK_LOW_AND_ABOVE",
] as const;

function safetyMinimums(value: string, name: string): Readonly<Record<string, string>> {
  const minimums: Record<string, string> = {};
  for (const entry of list(value)) {
    const [category = "", threshold = "", ...rest] = entry.split("=").map((part) => part.trim());
    if (!/^HARM_CATEGORY_[A-Z_]+$/.test(category) || rest.length > 0 || !(SAFETY_THRESHOLDS as readonly string[]).includes(threshold)) {
      throw new ConfigError(`${name}: "${entry}" is not HARM_CATEGORY_…=<threshold> with a threshold among ${SAFETY_THRESHOLDS.join(", ")}`);
    }
    minimums[category] = threshold;
  }
  return Object.freeze(minimums);
}

/** One of `allowed`, in any case, given back as it is spelled there (CQL's and Cassandra's names). */
const exactly = <const T extends string>(fallback: NoInfer<T>, allowed: readonly T[], description: string) =>
  variable({ type: `one of ${allowed.join(", ")}`, default: fallback, description }, (value, name) => {
    const found = allowed.find((option) => option.toLowerCase() === value.trim().toLowerCase());
    if (!found) throw new ConfigError(`${name} must be one of ${allowed.join(", ")} (got "${value}")`);
    return found;
  });

/** Text trimmed; unset when that leaves nothing. */
const trimmed = (description: string, type = "string", defaultText = "unset") =>
  optional({ type, defaultText, description }, (value) => value.trim() || undefined);

/** A comma-separated list (entries trimmed); empty when unset. */
const names = (description: string): Variable<string[]> => ({
  doc: { type: "list", defaultText: "unset", description },
  parse: (value) => list(value),
});

export const VARIABLES = {
  PORT: int(8080, "Gateway port (REST, vendor JSON/SSE, admin, result files), HTTP/1.1."),
  GRPC_PORT: int(8081, "Core port: gRPC, gRPC-Web and Connect over HTTP/2 cleartext."),
  HOST: text("127.0.0.1", "Address both ports bind to (`0.0.0.0` in containers)."),
  ADMIN_TOKEN: maybeText("Bearer token of `/admin/v1` and the AdminService RPCs, and the operator's sign-in to the web panel. At least 32 characters (`openssl rand -hex 32`): a shorter one stops the start with a message and exit code 1.", "random per run, printed"),
  ALLOW_WEAK_ADMIN_TOKEN: bool("Development only: `true` lets the service start with an `ADMIN_TOKEN` shorter than 32 characters."),
  AUTH_FAILURE_LIMIT: int(20, "Wrong credentials one client address (IPv4 address, IPv6 /64) may present within `AUTH_FAILURE_WINDOW`, counted together across the admin token, panel sign-in and sessions, owner tokens and API keys, on both ports. Past it every credential check of that address is refused, the right credential included, before the credential is looked at or a body read: `429 too_many_failed_credentials` with `Retry-After` (gRPC `RESOURCE_EXHAUSTED`), until the window ends. Calls that present no credential and successful checks count nothing.", 1),
  AUTH_FAILURE_WINDOW: time("1m", "The window of `AUTH_FAILURE_LIMIT`: it opens with an address's first failure, and the count starts over when it ends.", 1),
  PUBLIC_BASE_URL: optional({ type: "URL", defaultText: "`http://HOST:PORT`", description: "Origin used in result URLs (`result.image_url`). When it is `https://…`, the panel's session cookie is always `Secure`." }, (value) => value.replace(/\/+$/, "") || undefined),
  TRUST_PROXY: variable({ type: "true, false or a list of proxies", default: "false", description: "The reverse proxies in front of `PORT` whose `X-Forwarded-Proto`, `-For` and `-Host` are believed (Fastify's `trustProxy`): comma-separated addresses and CIDRs (`10.0.0.5,192.168.0.0/16`) or `loopback`, `linklocal`, `uniquelocal`; `true` believes every peer (only when nothing but the proxy can reach the port). A hop count is refused (Fastify 5 cannot check the peer for one and trusts no one). With a trusted proxy, `X-Forwarded-Proto: https` makes the session cookie `Secure`, and logs show the forwarded client address, and `AUTH_FAILURE_LIMIT` counts the forwarded client (so one guesser behind the proxy does not lock out its neighbours); `MAX_CONNECTIONS_PER_CLIENT` still counts each connection's own peer (the proxy's connections count against the proxy)." }, (value) => trustProxy(value)),
  ALLOW_PRIVATE_URLS: bool("Allow input-image fetches, webhooks and upstream video links on an origin other than the route's own to reach addresses that are not globally reachable (see [Limits and abuse](limits-and-abuse.md)). The route's own `base_url` is always allowed."),
  SIMULATED_LATENCY_MS: int(500, "Simulated provider: a new job stays queued that long, then an image or video takes that long to make; a text answer is streamed over that time."),
  SIMULATED_RENDER_THREADS: int(1, "Worker threads the simulator renders images and videos on, so rendering never stalls requests (`0`: on the event loop)."),
  DATA_DIR: variable({ type: "path", default: "./data", description: "The embedded database (`service.db`), the blob store (inputs and outputs) and the persisted URL-signing key. One process at a time owns it (a lock on `service.db` itself; see [Durability](operations.md#durability-restarts-and-backups))." }, (value) => resolve(value)),
  EMBEDDED_STORE: choice("sqlite", ["sqlite", "memory"], "Without Cassandra: `sqlite` (durable, `DATA_DIR/service.db`) or `memory` (nothing survives a restart; for throwaway runs and benchmarks)."),
  SQLITE_SYNCHRONOUS: choice("full", ["normal", "full", "extra"], "`full`: what an answer acknowledges is on disk before it leaves (survives a power loss), by group commit: one shared fsync of the WAL before answers, not one per commit. `normal`: survives a process crash; a power loss may undo the last commits. `extra`: SQLite's own per-commit `EXTRA`. See [Durability](operations.md#durability-restarts-and-backups)."),
  JOB_RETENTION: variable({ type: "duration", default: "30d", bound: "between 1s and 20 years", description: "Finished jobs, their webhook deliveries and their files are removed this long after they finished (units `s`, `m`, `h`, `d`). Accounts, keys and balance movements are never removed." }, retention),
  RETENTION_SWEEP_INTERVAL: time("1h", "How often a worker sweeps what is past retention (SQLite rows and files; Cassandra rows expire by TTL)."),
  ACCEPT_TIMEOUT: time("15s", "How long accepting one job may take. A retry that finds its `Idempotency-Key` still being accepted after that treats the acceptance as dead: it replays the job if it was stored, fences it off and creates one otherwise."),
  DRAIN_DELAY: time("5s", "On SIGTERM, how long `/readyz` answers 503 while requests are still served, before the ports close (SIGINT skips it)."),
  DEPENDENCY_CHECK_INTERVAL: time("1s", "How often Cassandra, Kafka or SQLite are probed for readiness (for SQLite, also whether `service.db` and its WAL are still the files open).", 100),
  PUBLISH_TIMEOUT: time("3s", "Bound of one publish to Kafka; a job whose announcement cannot be made in time is accepted and announced once Kafka takes it.", 100),
  RESULT_URL_TTL_SECONDS: int(86_400, "Lifetime of a signed result URL (24 h).", 1),
  URL_SIGNING_SECRET: optional({ type: "string", defaultText: "generated into `DATA_DIR`", description: "Key for signing result URLs, page tokens and web panel sessions; set it to share them across processes." }, (value) => Buffer.from(value, "utf8")),
  WEBHOOK_RETRY_SCHEDULE: variable(
    { type: "list of durations", default: "5s,5m,30m,2h,5h,10h", description: "Delays before each webhook retry (units `ms`, `s`, `m`, `h`)." },
    (value, name) => value.split(",").map((entry) => duration(entry, name)),
  ),
  WEBHOOK_TIMEOUT: time("15s", "Time a webhook receiver has to answer."),
  WEBHOOK_MAX_PER_DESTINATION: int(4, "Webhook requests in flight at once to one destination (origin: scheme, host, port), per process. Further attempts to it wait on the bus, unsent and not counted as attempts, so a receiver that never answers holds at most this many sockets and no consumer slot ([decision](decisions/0003-webhook-fairness.md)).", 1),
  WEBHOOK_MAX_PER_ACCOUNT: int(16, "Webhook requests in flight at once for one account, over all its destinations, per process; beyond, its attempts wait likewise.", 1),
  WEBHOOK_MAX_IN_FLIGHT: int(256, "Webhook requests in flight at once from one process; beyond, attempts wait likewise.", 1),
  WEBHOOK_DEFER: time("1s", "The shortest wait of an attempt held back by a limit above; a lane with a backlog spaces its attempts' returns by its typical request time per free slot (at most `WEBHOOK_BREAKER_MAX_OPEN`).", 10),
  WEBHOOK_BREAKER_FAILURES: int(5, "Consecutive attempts to one destination without an answer (timeout, refused, unreachable) that open its circuit breaker. While open, attempts to it are made without a request: each fails at once as \"not sent\" and follows `WEBHOOK_RETRY_SCHEDULE` (so deliveries still end as dead letters); any answer, even an error status, closes it. Kept per process.", 1),
  WEBHOOK_BREAKER_OPEN: time("30s", "How long a breaker stays open before one probe request goes through; each failed probe doubles it.", 100),
  WEBHOOK_BREAKER_MAX_OPEN: time("10m", "The longest open period.", 100),
  MAX_INPUT_IMAGES: int(100, "Input images per request (the active route's limit).", 1),
  MAX_INPUT_BYTES: bytes("200MiB", "Combined decoded size of inline input images. Sizes are bytes or `64KiB`, `2MiB`, `1GiB`."),
  MAX_PROMPT_BYTES_IMAGE: bytes("32KiB", "UTF-8 bytes of a prompt for image models, as received. Over it: 422 `prompt_too_long`."),
  MAX_PROMPT_BYTES_VIDEO: bytes("16KiB", "The same for the video model (jobs API and each `instances[i].prompt` of `interactions`)."),
  MAX_PROMPT_BYTES_TEXT: bytes("1MiB", "The same for text models and the multimodal real-time model; on `generateContent` / `streamGenerateContent` the text of all `contents` parts plus `systemInstruction`, plus the function call and response parts and the forwarded `generationConfig`, `tools`, `toolConfig` and `safetySettings` as JSON (`responseSchema`, `stopSequences`, declarations, …), together."),
  SAFETY_MIN_THRESHOLDS: optional({ type: "list of CATEGORY=THRESHOLD", defaultText: "unset", description: "The operator's minimum safety threshold per harm category on `generateContent` / `streamGenerateContent`, for example `HARM_CATEGORY_HARASSMENT=BLOCK_MEDIUM_AND_ABOVE,HARM_CATEGORY_DANGEROUS_CONTENT=BLOCK_ONLY_HIGH`. A caller's `safetySettings` threshold looser than its category's minimum is raised to it, and the minimum is added for a category the caller did not set; stricter thresholds pass as given. Thresholds, loosest first: `HARM_BLOCK_THRESHOLD_UNSPECIFIED`, `OFF`, `BLOCK_NONE`, `BLOCK_ONLY_HIGH`, `BLOCK_MEDIUM_AND_ABOVE`, `BLOCK_LOW_AND_ABOVE`. Unset: settings pass as the caller gave them." }, safetyMinimums),
  MAX_METADATA_KEYS: int(64, "Top-level keys of `metadata`. Over any metadata limit: 422 `metadata_too_large` naming it.", 0),
  MAX_METADATA_KEY_BYTES: bytes("256", "UTF-8 bytes of one top-level key."),
  MAX_METADATA_VALUE_BYTES: bytes("4KiB", "Bytes of one top-level value, as JSON."),
  MAX_METADATA_BYTES: bytes("16KiB", "Bytes of the whole `metadata` object, as JSON (nesting is bounded at 32 levels, not configurable)."),
  MAX_QUEUED_JOBS_PER_ACCOUNT: int(1000, "Jobs of one account accepted and not yet finished (queued or being generated). Beyond it: 429 `too_many_queued_jobs` with `Retry-After: 5`, nothing reserved or stored; the key is not consumed.", 1),
  HTTP_HEADERS_TIMEOUT: time("10s", "A request's line and headers must have arrived within this (gateway), the HTTP/2 preface and first headers within this (core); otherwise 408 `request_timeout` / the connection closes.", 100),
  HTTP_REQUEST_TIMEOUT: time("60s", "The whole request (headers and body; on the core: the request message) must have arrived within this; otherwise 408 `request_timeout` in the surface's shape (core: `DEADLINE_EXCEEDED`). The answer's own time is not counted.", 100),
  HTTP_IDLE_TIMEOUT: time("30s", "A connection (core: an HTTP/2 session) with no traffic at all for this long is closed. Not counted while the service produces an answer (a synchronous call, an SSE stream between chunks); counted again while an answer is being sent.", 100),
  HTTP_KEEP_ALIVE_TIMEOUT: time("5s", "How long a kept-alive HTTP/1.1 connection waits for its next request.", 100),
  MAX_CONNECTIONS: int(10_000, "Open connections per port, all clients together; beyond it a new connection is closed at once.", 1),
  MAX_CONNECTIONS_PER_CLIENT: int(256, "Open connections per port from one client address (IPv4 address, IPv6 /64). Beyond it the gateway answers at once, before reading anything, `429 too_many_connections` with `Retry-After: 1` and closes; the core closes the connection.", 1),
  MAX_PIPELINED_REQUESTS: int(8, "Requests of one gateway connection (HTTP/1.1) being answered at once. Requests a client pipelines behind them are parsed but wait unanswered, and while any waits the connection is not read, so a client that pipelines thousands of requests and never reads holds this many answers, not thousands; answers still come in order. Node also stops reading a connection whose answers are not being read.", 1),
  MAX_BODY_BYTES: bytes("1MiB", "Body (or RPC message) of every call that carries no input images, and the fields besides `input_images_base64` of one that does. Beyond it: 422 `input_too_large` naming the limit, before reading when the length is announced."),
  LARGE_UPLOAD_BYTES: bytes("1MiB", "A body above this (or chunked, on a route that takes images) is a large upload: it needs an upload slot, held until its body has been read whole (or the client went away), not while its answer is produced or streamed. On `POST /api/v1/generations` its inline images are decoded into the blob store as they arrive."),
  MAX_CONCURRENT_LARGE_UPLOADS: int(4, "Large uploads read at once per process (both ports share the count). Beyond it: 429 `too_many_uploads` with `Retry-After: 2`.", 1),
  MAX_BODY_MEMORY: bytes("512MiB", "Bytes of request bodies (RPC messages) being received at once per process, both ports together, every body counted, small ones too. A body takes its announced `Content-Length` before a byte of it is read (a chunked body takes its bytes as they arrive) and gives them back once it has been read whole or the client went away. Beyond it: 503 `server_busy` with `Retry-After: 1` (gateway; the core answers `UNAVAILABLE` with the same reason)."),
  GRPC_MAX_CONCURRENT_STREAMS: int(100, "Calls at once on one HTTP/2 connection to the core.", 1),
  INPUT_FETCH_TIMEOUT: time("30s", "How long fetching one input image from its URL may take; past it the job fails with `missing_input_images` (\"timed out after 30 s\").", 100),
  UPSTREAM_VIDEO_MAX_BYTES: bytes("512MiB", "Largest video file downloaded from an upstream route; above it the job fails with `upstream_rejected`."),
  IDEMPOTENCY_TTL: time("24h", "How long an `Idempotency-Key` is remembered."),
  PRICES_FILE: {
    doc: { type: "path", defaultText: "`src/config/default-prices.json`", description: "Initial price table; change prices at run time through admin." },
    parse: (value: string | undefined) => value ?? DEFAULT_PRICES_FILE,
  },
  RETRY_AFTER_SECONDS: int(30, "`Retry-After` sent with 503 while paused.", 1),
  CORE_URL: maybeText("When set, this process is only a gateway in front of the core at that URL (Connect over HTTP/2).", "unset", "URL"),
  CORS_ORIGINS: { doc: { type: "list of origins", defaultText: "none", description: "Comma-separated web origins whose pages may call the gateway port (`https://app.example.com,http://localhost:5173`): exact origins as a browser sends them (http or https, no path or trailing slash, default port left out, lower case); `*` is refused. None: no `Access-Control-*` header is ever sent. See [Browsers](clients.md#browsers)." }, parse: (value: string | undefined) => corsOrigins(value) },
  LOG_LEVEL: text("info", "Level of the one JSON log of every role (`debug`, `info`, `warn`, `error`, `silent`). Start, ready and stop lines are written whatever the level. See [Observability](operations-observability.md)."),
  METRICS_PORT: int(9464, "Where a process without the `api` role (`ROLE=worker`, `webhooks`) serves `GET /metrics`; `0` picks a free port (logged as `metrics listening`). A process with `api` serves it on `PORT`.", 0),
  OTEL_EXPORTER_OTLP_ENDPOINT: trimmed("Turns tracing on: spans go to `<endpoint>/v1/traces` as OTLP protobuf over HTTP (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` for a full URL, `OTEL_EXPORTER_OTLP_HEADERS` for auth headers, `OTEL_SDK_DISABLED=true` to force it off).", "URL"),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: trimmed("The full URL spans are sent to, when it is not `<OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces`; set alone, it turns tracing on too.", "URL"),
  OTEL_EXPORTER_OTLP_HEADERS: optional(
    { type: "list of key=value", defaultText: "unset", description: "Headers sent with every export (auth, for one): comma-separated `key=value` pairs, values URL-encoded (OpenTelemetry's format)." },
    otlpHeaders,
  ),
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: optional(
    { type: "list of key=value", defaultText: "unset", description: "The same, for traces only; when set, `OTEL_EXPORTER_OTLP_HEADERS` is not sent." },
    otlpHeaders,
  ),
  OTEL_SDK_DISABLED: variable(
    { type: "boolean", default: "false", description: "`true` turns tracing off whatever the endpoints say (any other value leaves it as they say)." },
    (value) => value.trim().toLowerCase() === "true",
  ),
  OTEL_SERVICE_NAME: trimmed("The `service.name` of this process's spans (`generation-service-api`, `-worker`, `-webhooks` for single roles).", "string", "`generation-service`, or `generation-service-<roles>`"),
  ROLE: variable({ type: "all, or a list of api, worker, webhooks", default: "all", description: "What this process runs: `all`, or a comma list of `api` (gateway + core RPC), `worker` (generation + reaper), `webhooks` (deliveries). A single role needs Cassandra and Kafka." }, (value) => roles(value)),
  CASSANDRA_CONTACT_POINTS: names("e.g. `127.0.0.1:9042`. When set, jobs, money, keys, idempotency keys and settings live in Cassandra."),
  CASSANDRA_KEYSPACE: text("generation", "Keyspace; created and migrated at start."),
  CASSANDRA_LOCAL_DC: text("datacenter1", "The driver's local data center."),
  CASSANDRA_REPLICATION_STRATEGY: exactly(
    "NetworkTopologyStrategy", ["NetworkTopologyStrategy", "SimpleStrategy"],
    "Replication strategy of the keyspace when the service creates it: `NetworkTopologyStrategy` keeps " +
      "`CASSANDRA_REPLICATION_FACTOR` copies in `CASSANDRA_LOCAL_DC`. An existing keyspace is left as it is (see " +
      "[Consistency](operations.md#consistency-and-replication)).",
  ),
  CASSANDRA_REPLICATION_FACTOR: int(
    3,
    "Copies of every row when the service creates the keyspace. `1` for a single-node development cluster " +
      "(`infra/`, the tests).",
    1,
  ),
  CASSANDRA_CONSISTENCY: exactly(
    "LOCAL_QUORUM", ["LOCAL_QUORUM", "QUORUM", "ALL"],
    "Consistency level of every read and write (a quorum or stronger, so a read sees every acknowledged write). " +
      "With 3 copies `LOCAL_QUORUM` goes on with one node down; `ALL` stops with it.",
  ),
  CASSANDRA_SERIAL_CONSISTENCY: exactly(
    "LOCAL_SERIAL", ["LOCAL_SERIAL", "SERIAL"],
    "Level of the lightweight transactions (reservations, idempotency keys, job claims) and of the reads that must " +
      "see them; `SERIAL` runs Paxos across all data centers.",
  ),
  CASSANDRA_SPECULATIVE_READ_DELAY: time(
    "500ms",
    "A read (never a write or a lightweight transaction) not answered by its node within this is sent to one more " +
      "node as well, and the first answer wins: a paused or cut-off node costs a read this long instead of the 15 s " +
      "request timeout.",
    10,
  ),
  KAFKA_BROKERS: names("e.g. `127.0.0.1:9092`. When set, job lifecycle events travel over Kafka."),
  KAFKA_TOPIC_PREFIX: text("", "Prefix of every topic and consumer group (several deployments on one cluster).", "empty"),
  KAFKA_PARTITIONS: int(6, "Partitions of the main topics, created at start.", 1),
  KAFKA_REPLICATION_FACTOR: int(
    3,
    "Copies of every partition of the topics the service creates. `1` for a single-broker development cluster " +
      "(`infra/`, the tests); a factor above the brokers' count stops the start. Existing topics are left as they " +
      "are.",
    1,
  ),
  KAFKA_MIN_INSYNC_REPLICAS: int(
    2,
    "The topics' `min.insync.replicas`: copies an `acks=all` publish needs. At most `KAFKA_REPLICATION_FACTOR`; `1`" +
      " for a single broker. With 3 and 2 one broker may be down.",
    1,
  ),
  KAFKA_ACKS: choice(
    "all", ["all", "1"],
    "What a publish of the event bus waits for: `all` (every in-sync copy, at least `KAFKA_MIN_INSYNC_REPLICAS`) or" +
      " `1` (the partition's leader alone: a leader lost before its followers copied it loses the event until the " +
      "reaper announces its job again). The job lifecycle feed always publishes with `1`.",
  ),
  KAFKA_SESSION_TIMEOUT: time(
    "10s",
    "A consumer group member (a process's consumer of one topic) not heard from this long is dropped and its partitions go to the " +
      "other members: how soon a killed process's work moves on, and, after a Kafka outage, how long the groups wait for the " +
      "members the broker remembers from before it. Members heartbeat every second; a shorter timeout drops a process whose event " +
      "loop stalls that long. The broker refuses one outside its `group.min.session.timeout.ms` (default 6 s) and " +
      "`group.max.session.timeout.ms`.",
    3000,
  ),
  KAFKA_RETRIES: int(
    12,
    "Retries of one Kafka client operation (connect, join, fetch, create topics) before it fails, 200 ms apart and then twice as " +
      "long each time up to 5 s: 12 keep trying for about 40 s. A consumer whose operation fails is started again, so a smaller " +
      "number restarts consumers sooner and more often during an outage or a leader election.",
    1,
  ),
  WORKER_ID: maybeText("Name of this worker in job leases.", "`host-pid-random`"),
  JOB_LEASE: time("30s", "A processing job's lease; renewed every third of it. A dead worker's job is taken over after it runs out."),
  WORKER_CONCURRENCY: int(8, "Jobs one worker process generates at once.", 1),
  REAPER_INTERVAL: time("5s", "How often a worker looks for abandoned work."),
  REQUEUE_AFTER: time("60s", "A queued job older than this is announced again; an acceptance that died before storing its job is undone after it."),
  TEXT_CALL_LIMIT: time("1h", "No synchronous text call lasts longer; the hold of an older one was left by a dead process and is released by the reaper."),
  SHUTDOWN_GRACE: time("20s", "On SIGTERM: how long in-flight jobs may take to finish before they are handed back."),
  VENDOR_BASE_URL: maybeText("Origin of the vendor's API (the service appends `/v1beta/...`). With `VENDOR_API_KEY`, every model goes to that one upstream instead of the simulator.", "unset", "URL"),
  VENDOR_API_KEY: maybeText("Key sent upstream as `x-vendor-api-key`."),
  ROUTES_FILE: maybeText("JSON route table ([api.md](upstream.md)); takes precedence over `VENDOR_BASE_URL`.", "unset", "path"),
  UPSTREAM_TIMEOUT: time("120s", "Default bound of one upstream call, and of silence in an upstream stream. Calls to a route go through node:http on a keep-alive connection pool of that route's own (idle connections are reused newest first and do not hold the process open); not `fetch`, whose web streams were a third of a text stream's CPU."),
  UPSTREAM_POLL_INTERVAL: time("1s", "How often a long-running upstream video operation is polled."),
  CANCEL_GRACE: time("5s", "How long a cancel of a processing job waits for the worker generating it to abort it and record what was produced; past it (the worker is dead or unreachable) the cancel ends the job itself, charging nothing.", 100),
  WATCH_FALLBACK: time("15s", "How long a watcher (`GET /api/v1/jobs/{id}/events`, `WatchJob`, `Prefer: wait`) relies on the job lifecycle feed alone before reading the job anyway, in case a signal was lost.", 100),
  SSE_KEEPALIVE: time("15s", "How often an unchanged job's event stream sends a `: keep-alive` comment.", 100),
} satisfies Record<string, Variable<unknown>>;

/** The environment's schema: parsing an environment with it reads each variable (zod; ignores every other key). */
export const ENVIRONMENT = environmentSchema(VARIABLES);

/** Each variable's value, as the schema reads it. */
export type Environment = { readonly [K in keyof typeof VARIABLES]: ReturnType<(typeof VARIABLES)[K]["parse"]> };

export { parseDuration };
