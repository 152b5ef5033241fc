import { DiskBlobStore } from "../adapters/disk/disk-blob-store.js";
import { HttpInputFetcher } from "../adapters/http/http-input-fetcher.js";
import { HttpWebhookTransport } from "../adapters/http/http-webhook-transport.js";
import type { StorePorts } from "../ports/stores.js";
import { InProcessEventBus } from "../adapters/memory/in-process-event-bus.js";
import { InProcessJobFeed } from "../adapters/memory/in-process-job-feed.js";
import type { JobFeed } from "../ports/job-feed.js";
import { MemoryApiKeyStore } from "../adapters/memory/memory-api-key-store.js";
import { MemoryDeliveryLog } from "../adapters/memory/memory-delivery-log.js";
import { MemoryIdempotencyStore } from "../adapters/memory/memory-idempotency-store.js";
import { MemoryJobStore } from "../adapters/memory/memory-job-store.js";
import { MemoryLedger } from "../adapters/memory/memory-ledger.js";
import { StepwiseIntentHolds } from "../adapters/shared/stepwise-intent-holds.js";
import { StepwiseAcceptanceWrites } from "../adapters/shared/stepwise-acceptance-writes.js";
import { MemoryPanelSessionStore } from "../adapters/memory/memory-panel-session-store.js";
import { MemorySettingsStore } from "../adapters/memory/memory-settings-store.js";
import { MemoryAuditLog } from "../adapters/memory/memory-audit-log.js";
import { SimulatedProvider } from "../adapters/provider/simulated/simulated-provider.js";
import { openSqliteStores } from "../adapters/sqlite/sqlite-stores.js";
import { RoutedVendorProvider } from "../adapters/vendor/routed-vendor-provider.js";
import { acceptanceWithSimulatedQueueTime, withSimulatedQueueTime } from "../adapters/provider/simulated/simulated-queue-time.js";
import type { ServiceSettings } from "./settings.js";
import type { CorePorts } from "../core/core-deps.js";
import type { DependencyProbe } from "../ports/dependency.js";
import type { EventBus } from "../ports/event-bus.js";
import type { GenerationProvider } from "../ports/provider.js";
import { systemClock } from "../ports/clock.js";
import type { Observability } from "./observability.js";
import { failureLog } from "./logger.js";
import { webhookCheckDelayMs } from "../core/workers/webhook-dispatcher.js";
import { tracedPort } from "../adapters/observability/tracing.js";
import { observedUpstream } from "../adapters/observability/observed-provider.js";
import { NO_BARRIER, type WriteBarrier } from "../ports/write-barrier.js";
import type { AcceptanceWrites } from "../ports/acceptance-writes.js";

/** Delay before a failed event handler sees its event again. */
const REDELIVERY_DELAY_MS = 1000;

/** A dependency to watch, and whether requests fail without it (a store) or only background work (a bus). */
export interface WatchedDependency {
  readonly probe: DependencyProbe;
  readonly neededByRequests: boolean;
}

export interface Backends {
  readonly ports: CorePorts;
  /** For the start-up log: which stores and bus are in use. */
  readonly description: string;
  readonly dependencies: readonly WatchedDependency[];
  /** The embedded default's store belongs to this process alone (a lock on DATA_DIR says so). */
  readonly ownsStore: boolean;
  close(): Promise<void>;
}

/** Runs one opening step until it succeeds (start-up waits for a server that is not up yet). */
export type Persist = <T>(dependency: string, open: () => Promise<T>) => Promise<T>;

interface OpenedStores {
  readonly stores: StorePorts;
  readonly barrier?: WriteBarrier;
  readonly bus?: EventBus;
  /** An accepted job's writes in one transaction, announcing on `bus` (the embedded file's own bus only); absent, they are taken step by step (StepwiseAcceptanceWrites). */
  readonly acceptanceWrites?: AcceptanceWrites;
  readonly dependency?: WatchedDependency;
  readonly description: string;
  readonly ownsStore: boolean;
  /** Commits what waits for a group commit and refuses later writes: before the bus closes (the embedded file's). */
  stopWrites?(): void;
  close(): Promise<void>;
}

async function openStores(config: ServiceSettings, obs: Observability, persist: Persist): Promise<OpenedStores> {
  if (config.cassandra) {
    const cassandra = config.cassandra;
    // Imported only when configured: the embedded default does not load cassandra-driver (idle memory, start-up time).
    const { openCassandraStores } = await import("../adapters/cassandra/cassandra-stores.js");
    const opened = await persist("cassandra", () =>
      openCassandraStores(cassandra, { defaultPrices: config.prices, retentionSeconds: Math.ceil(config.jobRetentionMs / 1000), telemetry: obs.metrics }),
    );
    return {
      ...opened,
      dependency: { probe: opened.probe, neededByRequests: true },
      description: `Cassandra ${cassandra.contactPoints.join(",")}/${cassandra.keyspace}`,
      ownsStore: false,
    };
  }
  if (config.embeddedStore === "sqlite") {
    // Not retried: a DATA_DIR held by another process, or unwritable, is an operator's mistake to fix.
    const opened = await openSqliteStores({
      dataDir: config.dataDir,
      synchronous: config.sqliteSynchronous,
      defaultPrices: config.prices,
      redeliveryDelayMs: REDELIVERY_DELAY_MS,
      onHandlerError: (topic, error) => failureLog(obs.logger)(`handler of ${topic} failed`, error),
      onCheckpointError: (message, failures) =>
        obs.logger.warn({ err: message, failures }, "checkpointing the SQLite WAL fails (told again at most once a minute while it does); the store checkpoints on its own past its fallback"),
      onCheckpointRecovered: (failures) => obs.logger.info({ failures }, "checkpointing the SQLite WAL works again"),
      onFileLost: (error) => obs.logger.error({ dataDir: config.dataDir }, error.message),
    });
    return {
      stores: opened.stores,
      barrier: opened.barrier,
      // Kafka, when configured, carries the events; otherwise the durable bus in the same file.
      bus: config.kafka ? undefined : opened.bus,
      acceptanceWrites: config.kafka ? undefined : opened.acceptanceWrites,
      dependency: { probe: opened.probe, neededByRequests: true },
      description: `SQLite ${opened.path} (synchronous=${config.sqliteSynchronous})`,
      ownsStore: true,
      stopWrites: opened.stopWrites,
      close: opened.close,
    };
  }
  const jobs = new MemoryJobStore();
  const audit = new MemoryAuditLog();
  const ledger = new MemoryLedger(audit);
  return {
    stores: {
      jobs,
      ledger,
      intentHolds: new StepwiseIntentHolds(jobs, ledger),
      apiKeys: new MemoryApiKeyStore(audit),
      panelSessions: new MemoryPanelSessionStore(audit),
      idempotency: new MemoryIdempotencyStore(),
      settings: new MemorySettingsStore(config.prices, audit),
      deliveries: new MemoryDeliveryLog(),
      audit,
      balanceAlerts: ledger,
    },
    description: "in-memory stores (nothing survives a restart)",
    ownsStore: true,
    close: async () => {},
  };
}

async function openKafka(config: ServiceSettings, obs: Observability, persist: Persist) {
  const kafka = config.kafka!;
  const { createKafkaEventBus } = await import("../adapters/kafka/kafka-event-bus.js"); // only when configured, as Cassandra
  return persist("kafka", () =>
    createKafkaEventBus({
      brokers: [...kafka.brokers],
      clientId: `generation-service-${config.worker.workerId}`,
      topicPrefix: kafka.topicPrefix,
      partitions: kafka.partitions,
      // Webhook checks and the longest deferral of a busy lane get tiers of their own, so neither waits for the next retry tier.
      delayTiersMs: [...new Set([
        REDELIVERY_DELAY_MS, config.simulatedLatencyMs, ...config.webhookRetryScheduleMs,
        webhookCheckDelayMs(config.webhookTimeoutMs), config.webhookFairness.breakerMaxOpenMs,
      ].filter((ms) => ms > 0))],
      redeliveryDelayMs: REDELIVERY_DELAY_MS,
      publishTimeoutMs: config.publishTimeoutMs,
      timing: { sessionTimeoutMs: kafka.sessionTimeoutMs, retries: kafka.retries },
      replication: kafka.replication,
      acks: kafka.acks,
      onHandlerError: (topic, error) => failureLog(obs.logger)(`handler of ${topic} failed`, error),
      logger: obs.logger.child({ component: "kafka" }),
      telemetry: obs.metrics,
    }),
  );
}

/** Every process hears every job signal: a consumer group of its own on the lifecycle topic. */
async function openKafkaFeed(config: ServiceSettings, obs: Observability, persist: Persist): Promise<JobFeed> {
  const kafka = config.kafka!;
  const { createKafkaJobFeed } = await import("../adapters/kafka/kafka-job-feed.js");
  return persist("kafka", () =>
    createKafkaJobFeed({
      brokers: [...kafka.brokers],
      clientId: `generation-service-${config.worker.workerId}`,
      topicPrefix: kafka.topicPrefix,
      partitions: kafka.partitions,
      publishTimeoutMs: config.publishTimeoutMs,
      timing: { sessionTimeoutMs: kafka.sessionTimeoutMs, retries: kafka.retries },
      replication: kafka.replication,
      logger: obs.logger.child({ component: "kafka" }),
    }),
  );
}

/**
 * Chooses the adapters: Cassandra stores when CASSANDRA_CONTACT_POINTS is set,
 * Kafka when KAFKA_BROKERS is set, the embedded ones otherwise (SQLite in
 * DATA_DIR, with its durable in-process bus). Servers that are not up yet are
 * waited for through `persist`.
 */
export async function openBackends(config: ServiceSettings, obs: Observability, persist: Persist): Promise<Backends> {
  const opened = await openStores(config, obs, persist);
  const dependencies: WatchedDependency[] = opened.dependency ? [opened.dependency] : [];
  let bus: EventBus | undefined;
  let feed: JobFeed;
  try {
    if (config.kafka) {
      const kafka = await openKafka(config, obs, persist);
      dependencies.push({ probe: kafka.probe, neededByRequests: false });
      obs.metrics.consumerLag((signal) => kafka.consumerLag(signal));
      bus = kafka;
      feed = await openKafkaFeed(config, obs, persist);
    } else {
      bus = opened.bus ?? new InProcessEventBus({ onHandlerError: (topic, error) => failureLog(obs.logger)(`handler of ${topic} failed`, error) });
      feed = new InProcessJobFeed();
    }
  } catch (error) {
    await bus?.close();
    await opened.close();
    throw error;
  }
  const stores = opened.stores;
  const provider: GenerationProvider = config.routes
    ? new RoutedVendorProvider({
        routes: config.routes,
        pausedRoutes: () => stores.settings.pausedRoutes(),
        pollIntervalMs: config.upstreamPollMs,
        videoDownload: { maxBytes: config.upstreamVideoMaxBytes, allowPrivate: config.allowPrivateUrls },
        telemetry: obs.metrics,
      })
    : observedUpstream(new SimulatedProvider({
        latencyMs: config.simulatedLatencyMs, maxInputImages: config.maxInputImages, renderThreads: config.simulatedRenderThreads,
      }), obs.metrics, "simulated");
  // With tracing on, every store and ledger call is a span of the trace it serves.
  const traced = <T extends object>(port: T, name: string) => (obs.tracing ? tracedPort(port, name) : port);
  const jobs = traced(stores.jobs, "jobs");
  const ledger = traced(stores.ledger, "ledger");
  const intentHolds = traced(stores.intentHolds, "intent_holds");
  return {
    ports: {
      jobs,
      ledger,
      intentHolds,
      // One transaction where the stores and the bus share the embedded file; elsewhere the steps one by one (each its own span).
      acceptanceWrites: opened.acceptanceWrites
        ? traced(config.routes ? opened.acceptanceWrites : acceptanceWithSimulatedQueueTime(opened.acceptanceWrites, config.simulatedLatencyMs), "acceptance_writes")
        : new StepwiseAcceptanceWrites(jobs, ledger, intentHolds),
      apiKeys: traced(stores.apiKeys, "api_keys"),
      panelSessions: traced(stores.panelSessions, "panel_sessions"),
      idempotency: traced(stores.idempotency, "idempotency"),
      settings: traced(stores.settings, "settings"),
      deliveries: traced(stores.deliveries, "deliveries"),
      audit: traced(stores.audit, "audit"),
      ...(stores.balanceAlerts && { balanceAlerts: stores.balanceAlerts }),
      bus: config.routes ? bus : withSimulatedQueueTime(bus, config.simulatedLatencyMs),
      feed,
      blobs: new DiskBlobStore(`${config.dataDir}/blobs`),
      provider,
      inputs: new HttpInputFetcher({ allowPrivate: config.allowPrivateUrls, timeoutMs: config.inputFetchTimeoutMs }),
      webhookTransport: new HttpWebhookTransport(config.allowPrivateUrls),
      durability: opened.barrier ?? NO_BARRIER,
      clock: systemClock,
      logger: obs.logger,
      telemetry: obs.metrics,
      tracer: obs.tracer,
    },
    description: `${config.routes ? `upstream routes ${config.routes.map((r) => r.name).join(",")}` : "simulated provider"}, ${opened.description}, ${
      config.kafka ? `Kafka ${config.kafka.brokers.join(",")}` : opened.bus ? "durable in-process event bus" : "in-process event bus"
    }`,
    dependencies,
    ownsStore: opened.ownsStore,
    async close() {
      // An acceptance waiting for its group commit publishes on the bus: it commits (or is refused) before the bus closes.
      opened.stopWrites?.();
      await feed.close();
      await bus!.close();
      await provider.close?.();
      await opened.close();
    },
  };
}
