import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { FastifyInstance } from "fastify";
import pRetry from "p-retry";
import type { Config } from "../config/config.js";
import { Readiness } from "../core/health/readiness.js";
import type { HeaderCheck } from "../core/auth/header-check.js";
import { remoteHeaderCheck } from "../core/auth/header-check.js";
import { CredentialGuard } from "../core/auth/credential-guard.js";
import { systemClock } from "../ports/clock.js";
import { generationBodyBytes } from "../transport/http/edge/body-guard.js";
import { buildGateway } from "../transport/http/gateway.js";
import { BodyBudget, UploadSlots } from "../transport/upload-slots.js";
import { listenRpc } from "../transport/rpc/rpc-server.js";
import { openBackends, type Backends, type Persist, type WatchedDependency } from "./backends.js";
import type { CoreClients } from "../core/core-clients.js";
import { createCore, remoteCoreClients, type Core } from "./core.js";
import { createLogger, failureLog } from "./logger.js";
import type { Logger as PinoLogger } from "pino";
import type { PrometheusMetrics } from "../adapters/observability/prometheus-metrics.js";
import { listenMetrics } from "../transport/http/metrics-server.js";
import { createObservability, type Observability } from "./observability.js";
import { requestSpans } from "../adapters/observability/tracing.js";
import { loadServiceSettings, type ServiceSettings } from "./settings.js";
import { retryingEveryError } from "../shared/every-error.js";

export interface RunningService {
  /** Gateway origin, e.g. http://127.0.0.1:8080 (when this process serves the API). */
  readonly httpUrl: string;
  /** Core origin (gRPC, gRPC-Web, Connect over h2c), when this process serves the core. */
  readonly grpcUrl?: string;
  readonly core?: Core;
  readonly backends?: string;
  readonly readiness: Readiness;
  /** What the edge holds right now: large uploads being read and body bytes being received, both ports together. */
  readonly edge: { readonly uploadSlots: UploadSlots; readonly bodyBudget: BodyBudget };
  /** This process's metrics (GET /metrics on the gateway port, or on METRICS_PORT). */
  readonly metrics: PrometheusMetrics;
  /** Where GET /metrics answers: the gateway's origin, or the metrics port's for a process without the api role. */
  readonly metricsUrl: string;
  /**
   * Graceful stop, in one place: /readyz turns 503 at once (a load balancer
   * drains this process) while requests are still served for DRAIN_DELAY,
   * then no new requests or jobs, in-flight work finished or handed back.
   */
  close(options?: { drain?: boolean }): Promise<void>;
}

/** A service whose gateway listens (answering 503 until ready) while its stores and bus are being opened. */
export interface LaunchedService {
  readonly httpUrl: string;
  readonly metricsUrl: string;
  readonly readiness: Readiness;
  /** Resolves once everything serves; rejects when start-up fails for good (a configuration error). */
  readonly ready: Promise<RunningService>;
  /** Stops whatever has started so far. */
  close(options?: { drain?: boolean }): Promise<void>;
}

/** A driver's error message, without the multi-line details some of them append. */
const firstLine = (error: unknown) => (error instanceof Error ? error.message : String(error)).split("\n")[0]!.trim();

/** How long start-up waits between attempts to reach a server that is not up yet. */
const START_RETRY_MS = 1000;

/** Probes every dependency each interval and tells readiness; logs each change once. */
function watchDependencies(dependencies: readonly WatchedDependency[], readiness: Readiness, intervalMs: number, logger: PinoLogger) {
  for (const { probe, neededByRequests } of dependencies) readiness.track(probe.name, { neededByRequests });
  let stopped = false;
  const running = new Set<Promise<void>>();
  const check = async ({ probe }: WatchedDependency) => {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), Math.max(500, intervalMs * 2));
    try {
      await probe.check(controller.signal);
      if (!stopped && readiness.report(probe.name, "up")) logger.info({ dependency: probe.name }, `${probe.name} is reachable again`);
    } catch (error) {
      const message = firstLine(error);
      if (!stopped && readiness.report(probe.name, "down", message)) logger.warn({ dependency: probe.name }, `${probe.name} is unreachable: ${message}`);
    } finally {
      clearTimeout(timer);
    }
  };
  const timers = dependencies.map((dependency) => {
    let busy = false;
    const timer = setInterval(() => {
      if (busy || stopped) return;
      busy = true;
      const run = check(dependency).finally(() => {
        busy = false;
        running.delete(run);
      });
      running.add(run);
    }, intervalMs);
    timer.unref();
    return timer;
  });
  return async () => {
    stopped = true;
    timers.forEach(clearInterval);
    await Promise.allSettled([...running]);
  };
}

export interface LaunchOptions {
  /** The process's logger (default: pino on stdout at LOG_LEVEL); tests pass one that captures or discards. */
  readonly logger?: PinoLogger;
}

/** What every step of the start-up shares: the settings, the process's logger, metrics and readiness, and its stop signal. */
interface Launch {
  readonly config: ServiceSettings;
  readonly logger: PinoLogger;
  readonly observability: Observability;
  readonly readiness: Readiness;
  /** What the edge holds, both ports together. */
  readonly edge: RunningService["edge"];
  /** Aborted by close(): a start-up still waiting for a dependency gives up. */
  readonly stopping: AbortController;
  /** What has started so far: what the gateway's calls reach once ready, and what close() stops. */
  readonly started: Started;
}

interface Started {
  clients?: CoreClients;
  headerCheck?: HeaderCheck;
  gateway?: FastifyInstance;
  metricsServer?: Awaited<ReturnType<typeof listenMetrics>>;
  backends?: Backends;
  core?: Core;
  rpc?: Awaited<ReturnType<typeof listenRpc>>;
  stopWatching?: () => Promise<void>;
}

/**
 * The composition root. Role `api` serves the gateway on PORT and the core on
 * GRPC_PORT; `worker` and `webhooks` run the consumers. With CORE_URL set the
 * process is only a gateway in front of that core. The gateway listens first
 * and answers 503 with Retry-After until the stores and bus are open, so a
 * starting process never answers 500; a server that is not up yet is waited
 * for (readiness says which), not a reason to exit.
 */
export async function launchService(given: Config, options: LaunchOptions = {}): Promise<LaunchedService> {
  // The files the configuration names (prices, routes, the URL-signing key) are read here, before anything listens.
  const config = loadServiceSettings(given);
  const logger = options.logger ?? createLogger(config.logLevel, [...config.roles].join(","));
  const launch: Launch = {
    config,
    logger,
    observability: createObservability(logger, config.tracing !== undefined),
    readiness: new Readiness(),
    // One count of large uploads and one budget of body bytes being received (MAX_BODY_MEMORY) for the process, both ports.
    edge: { uploadSlots: new UploadSlots(config.edge.maxConcurrentLargeUploads), bodyBudget: new BodyBudget(config.edge.maxBodyMemory) },
    stopping: new AbortController(),
    started: {},
  };
  const httpUrl = config.roles.has("api") ? await startGateway(launch) : "";
  const metricsUrl = await startMetrics(launch, httpUrl);
  const close = closing(launch);
  const ready = (async (): Promise<RunningService> => {
    const { started } = launch;
    const running = (grpcUrl?: string): RunningService => ({
      httpUrl, grpcUrl, core: started.core, backends: started.backends?.description, readiness: launch.readiness, edge: launch.edge,
      metrics: launch.observability.metrics, metricsUrl, close,
    });
    if (config.coreUrl) {
      connectRemoteCore(launch, config.coreUrl);
      launch.readiness.markStarted();
      return running();
    }
    await startCore(launch, httpUrl);
    const rpc = config.roles.has("api") ? await startCorePort(launch) : undefined;
    launch.readiness.markStarted();
    return running(rpc && `http://${config.host}:${rpc.port}`);
  })();
  ready.catch(() => undefined);
  return { httpUrl, metricsUrl, readiness: launch.readiness, ready, close };
}

/** The gateway, listening at once and answering 503 until the core's clients exist; answers its origin. */
async function startGateway({ config, logger, observability, readiness, edge, started }: Launch): Promise<string> {
  // The gate answers 503 until `clients` exist, so these getters are never reached before.
  const lazy: CoreClients = {
    get generation() { return started.clients!.generation; },
    get text() { return started.clients!.text; },
    get admin() { return started.clients!.admin; },
    get account() { return started.clients!.account; },
    get files() { return started.clients!.files; },
  };
  const gateway = await buildGateway(lazy, {
    logger,
    metrics: observability.metrics,
    tracing: observability.tracing ? requestSpans : undefined,
    readiness,
    edge: config.edge,
    generationBodyBytes: generationBodyBytes(config.limits, config.edge),
    headerCheck: (headers, needs, client) => started.headerCheck!(headers, needs, client),
    limits: config.limits,
    // Beside the core, large requests' inline images are staged into its blob store while they arrive.
    staging: () => started.core?.staging,
    uploadSlots: edge.uploadSlots,
    bodyBudget: edge.bodyBudget,
    corsOrigins: config.corsOrigins,
    sseKeepAliveMs: config.sseKeepAliveMs,
    publicBaseUrl: config.publicBaseUrl,
    trustProxy: config.trustProxy,
  });
  started.gateway = gateway;
  await gateway.listen({ host: config.host, port: config.port });
  return `http://${config.host}:${(gateway.server.address() as AddressInfo).port}`;
}

/** Where GET /metrics answers: a process without the gateway serves its metrics on a port of its own. */
async function startMetrics({ config, observability, readiness, started }: Launch, httpUrl: string): Promise<string> {
  if (config.roles.has("api")) return httpUrl;
  started.metricsServer = await listenMetrics(observability.metrics, config.host, config.metricsPort, readiness);
  return `http://${config.host}:${started.metricsServer.port}`;
}

/** A gateway in front of a remote core: its clients, and the credential checks made here. */
function connectRemoteCore({ config, started }: Launch, coreUrl: string): void {
  started.clients = remoteCoreClients(coreUrl, config.urlSigningSecret);
  // The core counts what it is asked; the admin token, checked here, counts in this gateway.
  const guard = new CredentialGuard(config.authFailures, systemClock);
  started.headerCheck = remoteHeaderCheck(started.clients.generation, started.clients.account, config.adminToken, config.urlSigningSecret, guard);
}

/** The stores and bus (waited for while unreachable), the core over them, its dependencies watched, its consumers started. */
async function startCore(launch: Launch, httpUrl: string): Promise<void> {
  const { config, logger, observability, readiness, stopping, started } = launch;
  const startedAt = new Date();
  const backends = await openBackends(config, observability, persistently(launch));
  started.backends = backends;
  if (stopping.signal.aborted) {
    await backends.close();
    throw new Error("stopped during start-up");
  }
  const core = createCore(
    config, backends.ports, config.publicBaseUrl ?? (httpUrl || `http://${config.host}:${config.port}`),
    backends.ownsStore ? startedAt : undefined, observability,
  );
  started.core = core;
  started.clients = core.clients;
  started.headerCheck = core.headerCheck;
  started.stopWatching = watchDependencies(backends.dependencies, readiness, config.dependencyCheckMs, logger);
  await core.startConsumers(config.roles, failureLog(logger));
}

/** The core's own port (gRPC, gRPC-Web, Connect over h2c), beside the gateway. */
async function startCorePort({ config, logger, readiness, edge, started }: Launch) {
  started.rpc = await listenRpc(started.core!, config.host, config.grpcPort, failureLog(logger), readiness, {
    edge: config.edge, limits: config.limits, uploads: edge.uploadSlots, bodyBudget: edge.bodyBudget,
    // The core port's debug lines (a client that went away, a connection over its client's cap) go to the gateway's pino.
    debugLog: (message, facts) => logger.debug({ port: "core", ...facts }, message),
  });
  return started.rpc;
}

/** Opens a dependency, trying again every START_RETRY_MS, whatever its error, until it opens or the process stops. */
function persistently({ logger, readiness, stopping }: Launch): Persist {
  return async <T>(dependency: string, open: () => Promise<T>): Promise<T> => {
    // p-retry rejects an attempt that succeeds after the abort: what it opened is returned anyway, for the caller to close.
    let opened: { value: T } | undefined;
    try {
      return await pRetry(retryingEveryError(async () => (opened = { value: await open() }).value), {
        retries: Infinity,
        minTimeout: START_RETRY_MS,
        factor: 1,
        signal: stopping.signal,
        onFailedAttempt: ({ error, attemptNumber }) => {
          readiness.starting(`${dependency} unreachable`);
          if (attemptNumber === 1) logger.warn({ dependency }, `waiting for ${dependency} (retrying every ${START_RETRY_MS} ms): ${firstLine(error)}`);
        },
      });
    } catch (error) {
      if (opened) return opened.value;
      if (stopping.signal.aborted) throw new Error("stopped during start-up");
      throw error;
    }
  };
}

/** The graceful stop of what has started so far, made once however often it is asked for. */
function closing({ config, readiness, stopping, started }: Launch): RunningService["close"] {
  let closed: Promise<void> | undefined;
  return (options: { drain?: boolean } = {}) => {
    closed ??= (async () => {
      readiness.drain();
      if (options.drain !== false && config.drainDelayMs > 0 && readiness.current.serving) await sleep(config.drainDelayMs);
      stopping.abort();
      await started.gateway?.close();
      await started.rpc?.close();
      await started.core?.stopConsumers(config.shutdownGraceMs);
      await started.stopWatching?.();
      await started.backends?.close();
      await started.metricsServer?.close();
    })();
    return closed;
  };
}

/** Starts the service and resolves once it serves (the gateway answers 503 until then). */
export async function startService(config: Config, options?: LaunchOptions): Promise<RunningService> {
  const launched = await launchService(config, options);
  try {
    return await launched.ready;
  } catch (error) {
    await launched.close({ drain: false }).catch(() => undefined);
    throw error;
  }
}
