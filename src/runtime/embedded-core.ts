import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../gen/generation/v1/text_service_pb.js";
import { DiskBlobStore } from "../adapters/disk/disk-blob-store.js";
import { HttpInputFetcher } from "../adapters/http/http-input-fetcher.js";
import { HttpWebhookTransport } from "../adapters/http/http-webhook-transport.js";
import { InProcessEventBus } from "../adapters/memory/in-process-event-bus.js";
import { MemoryApiKeyStore } from "../adapters/memory/memory-api-key-store.js";
import { MemoryDeliveryLog } from "../adapters/memory/memory-delivery-log.js";
import { MemoryIdempotencyStore } from "../adapters/memory/memory-idempotency-store.js";
import { MemoryJobStore } from "../adapters/memory/memory-job-store.js";
import { MemoryLedger } from "../adapters/memory/memory-ledger.js";
import { MemorySettingsStore } from "../adapters/memory/memory-settings-store.js";
import { SimulatedProvider } from "../adapters/provider/simulated/simulated-provider.js";
import { withSimulatedQueueTime } from "../adapters/provider/simulated/simulated-queue-time.js";
import type { Config } from "../config/config.js";
import type { CoreDeps, CorePorts } from "../core/core-deps.js";
import { createAdminService } from "../core/services/admin-service.js";
import { createFileService } from "../core/services/file-service.js";
import { createGenerationService } from "../core/services/generation-service.js";
import { createTextService } from "../core/services/text-service.js";
import { createGenerationWorker, type JobFinished } from "../core/workers/generation-worker.js";
import { createWebhookDispatcher, type WebhookAttemptDue } from "../core/workers/webhook-dispatcher.js";
import type { GenerationRequested } from "../core/jobs/accept-job.js";
import { TOPICS, type Subscription } from "../ports/event-bus.js";
import { systemClock } from "../ports/clock.js";
import { createInProcessClient } from "../transport/rpc/in-process-client.js";
import type { CoreClients } from "./core-clients.js";

const INPUT_FETCH_TIMEOUT_MS = 30_000;

export interface Core {
  readonly deps: CoreDeps;
  readonly services: {
    readonly generation: ReturnType<typeof createGenerationService>;
    readonly text: ReturnType<typeof createTextService>;
    readonly admin: ReturnType<typeof createAdminService>;
    readonly files: ReturnType<typeof createFileService>;
  };
  /** The in-process clients the gateway uses when it runs beside the core. */
  readonly clients: CoreClients;
  startWorkers(): Promise<void>;
  close(): Promise<void>;
}

/** The embedded adapters: memory stores, in-process bus, disk blobs, simulated provider. */
export function embeddedPorts(config: Config, logError: (message: string, error: unknown) => void): CorePorts {
  return {
    jobs: new MemoryJobStore(),
    ledger: new MemoryLedger(),
    apiKeys: new MemoryApiKeyStore(),
    idempotency: new MemoryIdempotencyStore(),
    settings: new MemorySettingsStore(config.prices),
    bus: withSimulatedQueueTime(
      new InProcessEventBus({ onHandlerError: (topic, error) => logError(`handler of ${topic} failed`, error) }),
      config.simulatedLatencyMs,
    ),
    blobs: new DiskBlobStore(`${config.dataDir}/blobs`),
    provider: new SimulatedProvider({ latencyMs: config.simulatedLatencyMs }),
    inputs: new HttpInputFetcher({ allowPrivate: config.allowPrivateUrls, timeoutMs: INPUT_FETCH_TIMEOUT_MS, maxBytes: config.maxInputBytes }),
    webhookTransport: new HttpWebhookTransport(config.allowPrivateUrls),
    deliveries: new MemoryDeliveryLog(),
    clock: systemClock,
  };
}

export function createCore(config: Config, ports: CorePorts, publicBaseUrl: string): Core {
  const deps: CoreDeps = {
    ...ports,
    settingsOf: {
      adminToken: config.adminToken,
      limits: { maxInputImages: config.maxInputImages, maxInputBytes: config.maxInputBytes },
      idempotencyTtlMs: config.idempotencyTtlMs,
      resultUrlTtlSeconds: config.resultUrlTtlSeconds,
      urlSigningSecret: config.urlSigningSecret,
      publicBaseUrl,
      retryAfterSeconds: config.retryAfterSeconds,
      webhookRetryScheduleMs: config.webhookRetryScheduleMs,
      webhookTimeoutMs: config.webhookTimeoutMs,
    },
  };
  const services = {
    generation: createGenerationService(deps),
    text: createTextService(deps),
    admin: createAdminService(deps),
    files: createFileService(deps),
  };
  const clients: CoreClients = {
    generation: createInProcessClient(GenerationService, services.generation),
    text: createInProcessClient(TextService, services.text),
    admin: createInProcessClient(AdminService, services.admin),
    files: createInProcessClient(FileService, services.files),
  };
  const subscriptions: Subscription[] = [];
  return {
    deps,
    services,
    clients,
    async startWorkers() {
      const worker = createGenerationWorker(deps);
      const webhooks = createWebhookDispatcher(deps);
      subscriptions.push(
        await deps.bus.subscribe<GenerationRequested>(TOPICS.generationRequested, "generation-workers", worker.handle),
        await deps.bus.subscribe<JobFinished>(TOPICS.jobFinished, "webhook-dispatchers", webhooks.onJobFinished),
        await deps.bus.subscribe<WebhookAttemptDue>(TOPICS.webhookDelivery, "webhook-dispatchers", webhooks.onAttemptDue),
      );
    },
    async close() {
      await Promise.all(subscriptions.map((s) => s.close()));
      await deps.bus.close();
    },
  };
}

/** Clients of a core in another process, over Connect on HTTP/2. */
export function remoteCoreClients(baseUrl: string): CoreClients {
  const transport = createConnectTransport({ baseUrl, httpVersion: "2" });
  return {
    generation: createClient(GenerationService, transport),
    text: createClient(TextService, transport),
    admin: createClient(AdminService, transport),
    files: createClient(FileService, transport),
  };
}
