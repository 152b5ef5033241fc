import { DiskBlobStore } from "../adapters/disk/disk-blob-store.js";
import { HttpInputFetcher } from "../adapters/http/http-input-fetcher.js";
import { HttpWebhookTransport } from "../adapters/http/http-webhook-transport.js";
import { openCassandraStores } from "../adapters/cassandra/cassandra-stores.js";
import { createKafkaEventBus } from "../adapters/kafka/kafka-event-bus.js";
import { InProcessEventBus } from "../adapters/memory/in-process-event-bus.js";
import { MemoryApiKeyStore } from "../adapters/memory/memory-api-key-store.js";
import { MemoryDeliveryLog } from "../adapters/memory/memory-delivery-log.js";
import { MemoryIdempotencyStore } from "../adapters/memory/memory-idempotency-store.js";
import { MemoryJobStore } from "../adapters/memory/memory-job-store.js";
import { MemoryLedger } from "../adapters/memory/memory-ledger.js";
import { MemorySettingsStore } from "../adapters/memory/memory-settings-store.js";
import { SimulatedProvider } from "../adapters/provider/simulated/simulated-provider.js";
import { RoutedVendorProvider } from "../adapters/vendor/routed-vendor-provider.js";
import { withSimulatedQueueTime } from "../adapters/provider/simulated/simulated-queue-time.js";
import type { Config } from "../config/config.js";
import type { CorePorts } from "../core/core-deps.js";
import type { EventBus } from "../ports/event-bus.js";
import type { GenerationProvider } from "../ports/provider.js";
import { systemClock } from "../ports/clock.js";

const INPUT_FETCH_TIMEOUT_MS = 30_000;
/** Delay before a failed event handler sees its event again. */
const REDELIVERY_DELAY_MS = 1000;

export interface Backends {
  readonly ports: CorePorts;
  /** For the start-up log: which stores and bus are in use. */
  readonly description: string;
  close(): Promise<void>;
}

type Log = (message: string, error: unknown) => void;

async function openBus(config: Config, log: Log): Promise<EventBus> {
  if (!config.kafka) {
    return new InProcessEventBus({ onHandlerError: (topic, error) => log(`handler of ${topic} failed`, error) });
  }
  return createKafkaEventBus({
    brokers: [...config.kafka.brokers],
    clientId: `generation-service-${config.worker.workerId}`,
    topicPrefix: config.kafka.topicPrefix,
    partitions: config.kafka.partitions,
    delayTiersMs: [...new Set([REDELIVERY_DELAY_MS, config.simulatedLatencyMs, ...config.webhookRetryScheduleMs].filter((ms) => ms > 0))],
    redeliveryDelayMs: REDELIVERY_DELAY_MS,
    onHandlerError: (topic, error) => log(`handler of ${topic} failed`, error),
  });
}

/**
 * Chooses the adapters: Cassandra stores when CASSANDRA_CONTACT_POINTS is set,
 * Kafka when KAFKA_BROKERS is set, the embedded ones otherwise.
 */
export async function openBackends(config: Config, log: Log): Promise<Backends> {
  const cassandra = config.cassandra ? await openCassandraStores(config.cassandra, config.prices) : undefined;
  const stores = cassandra?.stores ?? {
    jobs: new MemoryJobStore(),
    ledger: new MemoryLedger(),
    apiKeys: new MemoryApiKeyStore(),
    idempotency: new MemoryIdempotencyStore(),
    settings: new MemorySettingsStore(config.prices),
    deliveries: new MemoryDeliveryLog(),
  };
  let bus: EventBus;
  try {
    bus = await openBus(config, log);
  } catch (error) {
    await cassandra?.close();
    throw error;
  }
  const provider: GenerationProvider = config.routes
    ? new RoutedVendorProvider({
        routes: config.routes,
        pausedRoutes: () => stores.settings.pausedRoutes(),
        pollIntervalMs: config.upstreamPollMs,
      })
    : new SimulatedProvider({
        latencyMs: config.simulatedLatencyMs, maxInputImages: config.maxInputImages, renderThreads: config.simulatedRenderThreads,
      });
  return {
    ports: {
      ...stores,
      bus: config.routes ? bus : withSimulatedQueueTime(bus, config.simulatedLatencyMs),
      blobs: new DiskBlobStore(`${config.dataDir}/blobs`),
      provider,
      inputs: new HttpInputFetcher({ allowPrivate: config.allowPrivateUrls, timeoutMs: INPUT_FETCH_TIMEOUT_MS }),
      webhookTransport: new HttpWebhookTransport(config.allowPrivateUrls),
      clock: systemClock,
      log,
    },
    description: `${config.routes ? `upstream routes ${config.routes.map((r) => r.name).join(",")}` : "simulated provider"}, ${config.cassandra ? `Cassandra ${config.cassandra.contactPoints.join(",")}/${config.cassandra.keyspace}` : "in-memory stores"}, ${
      config.kafka ? `Kafka ${config.kafka.brokers.join(",")}` : "in-process event bus"
    }`,
    async close() {
      await bus.close();
      await provider.close?.();
      await cassandra?.close();
    },
  };
}
