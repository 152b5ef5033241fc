import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AccountService } from "../../gen/generation/v1/account_service_pb.js";
import { AdminService } from "../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../gen/generation/v1/text_service_pb.js";
import type { Role } from "../config/config.js";
import type { ServiceSettings } from "./settings.js";
import type { CoreDeps, CorePorts } from "../core/core-deps.js";
import type { GenerationRequested } from "../core/jobs/accept-job.js";
import { createAccountService } from "../core/services/account-service.js";
import { createAdminService } from "../core/services/admin-service.js";
import { createFileService } from "../core/services/file-service.js";
import { createGenerationService } from "../core/services/generation-service.js";
import { createTextService } from "../core/services/text-service.js";
import { createGenerationWorker } from "../core/workers/generation-worker.js";
import type { JobFinished } from "../core/jobs/finish-job.js";
import { createWebhookDispatcher, type WebhookAttemptDue } from "../core/workers/webhook-dispatcher.js";
import { createBalanceAlertRelay } from "../core/webhooks/balance-alerts.js";
import { createRetentionSweeper } from "../core/workers/retention.js";
import { createAnnouncer } from "../core/jobs/announcer.js";
import { TOPICS, type Subscription } from "../ports/event-bus.js";
import { createInProcessClient } from "../transport/rpc/in-process-transport.js";
import type { CoreClients } from "../core/core-clients.js";
import { localHeaderCheck, type HeaderCheck } from "../core/auth/header-check.js";
import { CLIENT_ADDRESS, CredentialGuard, credentialGuardInterceptor } from "../core/auth/credential-guard.js";
import { domainErrors } from "../core/errors/rpc-errors.js";
import { FORWARDED_CLIENT_HEADER, forwardedClient } from "../transport/client-address.js";
import { createInlineStaging, type InlineStaging } from "../core/jobs/inline-staging.js";
import { coreTime } from "../transport/http/request-timing.js";
import { rpcObservation } from "../adapters/observability/rpc-observation.js";
import { injectTraceContext } from "../adapters/observability/tracing.js";
import type { Interceptor, Transport } from "@connectrpc/connect";
import type { Observability } from "./observability.js";
import type { DescService } from "@bufbuild/protobuf";

export interface Core {
  readonly deps: CoreDeps;
  /**
   * The core as every edge calls it: clients of a transport that runs the core's interceptors and reaches
   * its services in this process (the ports' routers forward to these too).
   */
  readonly clients: CoreClients;
  /** Credentials from headers alone, checked by both edges before a body is read. */
  readonly headerCheck: HeaderCheck;
  /** URL_SIGNING_SECRET: signs result links, and the client a remote gateway forwards a call for. */
  readonly urlSigningSecret: Buffer;
  /** Where the gateway beside the core decodes a large request's inline images while it arrives. */
  readonly staging: InlineStaging;
  /** Starts the consumers of the given roles (worker: generation + reaper; webhooks: deliveries). */
  startConsumers(roles: ReadonlySet<Role>, log: (message: string, error: unknown) => void): Promise<void>;
  /** Stops consuming; in-flight jobs get `graceMs` to finish, then are handed back. */
  stopConsumers(graceMs: number): Promise<void>;
}

/** Methods that check no credential (ListModels is public): a client over its budget of failures may still call them. */
const OPEN_METHODS: ReadonlySet<object> = new Set([GenerationService.method.listModels]);

/** The services whose calls present credentials. */
const GUARDED: ReadonlySet<DescService> = new Set<DescService>([GenerationService, TextService, AdminService, AccountService]);

/**
 * `ownsStoreSince`: set when this process is the only user of its store (the
 * embedded default), so work left unfinished before it started is recovered at once.
 */
export function createCore(config: ServiceSettings, ports: CorePorts, publicBaseUrl: string, ownsStoreSince: Date | undefined, observability: Observability): Core {
  const deps: CoreDeps = {
    ...ports,
    settingsOf: {
      adminToken: config.adminToken,
      limits: config.limits,
      safetyMinimums: config.safetyMinimums,
      maxQueuedJobsPerAccount: config.maxQueuedJobsPerAccount,
      idempotencyTtlMs: config.idempotencyTtlMs,
      resultUrlTtlSeconds: config.resultUrlTtlSeconds,
      urlSigningSecret: config.urlSigningSecret,
      publicBaseUrl,
      retryAfterSeconds: config.retryAfterSeconds,
      webhookRetryScheduleMs: config.webhookRetryScheduleMs,
      webhookTimeoutMs: config.webhookTimeoutMs,
      acceptTimeoutMs: config.acceptTimeoutMs,
      cancelGraceMs: config.cancelGraceMs,
      watchFallbackMs: config.watchFallbackMs,
      ownsStoreSince,
    },
  };
  const announcer = createAnnouncer(deps.bus, deps.logger);
  // One count of failed credentials per client for the process: the edges' checks and the handlers' (AUTH_FAILURE_*).
  const guard = new CredentialGuard(config.authFailures, deps.clock);
  const services = {
    generation: createGenerationService(deps, announcer.announce),
    text: createTextService(deps),
    admin: createAdminService(deps),
    account: createAccountService(deps),
    files: createFileService(deps),
  };
  // Every call reaches the services through these, however it arrived: counted, timed and traced (rpc_server_*),
  // its credentials' failures counted per client (FileService's calls carry a signed link, no credential), refusals as ConnectErrors.
  const interceptors = [
    // A gateway request's core time (Server-Timing, http_server_core_duration_seconds), when a gateway request made the call.
    coreTime,
    rpcObservation(observability.metrics.rpc, observability.tracing),
    credentialGuardInterceptor(guard, GUARDED, OPEN_METHODS),
    domainErrors,
  ];
  const clients: CoreClients = {
    generation: createInProcessClient(GenerationService, services.generation, interceptors),
    text: createInProcessClient(TextService, services.text, interceptors),
    admin: createInProcessClient(AdminService, services.admin, interceptors),
    account: createInProcessClient(AccountService, services.account, interceptors),
    files: createInProcessClient(FileService, services.files, interceptors),
  };
  const subscriptions: Subscription[] = [];
  let worker: ReturnType<typeof createGenerationWorker> | undefined;
  let webhooks: ReturnType<typeof createWebhookDispatcher> | undefined;
  let retentionTimer: NodeJS.Timeout | undefined;
  const balanceAlerts = createBalanceAlertRelay(deps);
  return {
    deps,
    clients,
    headerCheck: localHeaderCheck(deps, guard),
    urlSigningSecret: config.urlSigningSecret,
    staging: createInlineStaging(deps.blobs, config.limits),
    async startConsumers(roles, log) {
      if (roles.has("worker")) {
        worker = createGenerationWorker(deps, config.worker);
        subscriptions.push(await deps.bus.subscribe<GenerationRequested>(TOPICS.generationRequested, "generation-workers", worker.handle));
        worker.listen();
        worker.startReaper((error) => log("reaper pass failed", error));
        const retention = createRetentionSweeper(deps, { retentionMs: config.jobRetentionMs });
        let sweeping = false;
        retentionTimer = setInterval(() => {
          if (sweeping) return;
          sweeping = true;
          retention.sweep().catch((error) => log("retention sweep failed", error)).finally(() => (sweeping = false));
        }, config.retentionSweepMs);
        retentionTimer.unref();
      }
      if (roles.has("webhooks")) {
        webhooks = createWebhookDispatcher(deps, config.webhookFairness);
        subscriptions.push(
          await deps.bus.subscribe<JobFinished>(TOPICS.jobFinished, "webhook-dispatchers", webhooks.onJobFinished),
          await deps.bus.subscribe<WebhookAttemptDue>(TOPICS.webhookDelivery, "webhook-dispatchers", webhooks.onAttemptDue),
        );
        balanceAlerts.start();
      }
    },
    async stopConsumers(graceMs) {
      clearInterval(retentionTimer);
      balanceAlerts.stop();
      announcer.close();
      await Promise.all(subscriptions.splice(0).map((s) => s.close()));
      await Promise.all([worker?.stop(graceMs), webhooks?.stop(graceMs)]);
    },
  };
}

/** Each call to a remote core names its caller's client, signed (forwardedClient): the core counts failed credentials by it. */
const nameClient = (secret: Buffer): Interceptor => (next) => (request) => {
  const client = request.contextValues.get(CLIENT_ADDRESS);
  if (client !== undefined) request.header.set(FORWARDED_CLIENT_HEADER, forwardedClient(client, secret));
  return next(request);
};

/** Each call to a remote core carries the current trace context (traceparent), so the core's spans join the request's trace. */
const carryTrace: Interceptor = (next) => (request) => {
  for (const [name, value] of Object.entries(injectTraceContext({}))) request.header.set(name, value);
  return next(request);
};

/** Clients of a core in another process, over Connect on HTTP/2. */
export function remoteCoreClients(baseUrl: string, secret: Buffer): CoreClients {
  return coreClientsOf(createConnectTransport({ baseUrl, httpVersion: "2", interceptors: [coreTime, carryTrace, nameClient(secret)] }));
}

/** The core's services as clients of one transport. */
function coreClientsOf(transport: Transport): CoreClients {
  return {
    generation: createClient(GenerationService, transport),
    text: createClient(TextService, transport),
    admin: createClient(AdminService, transport),
    account: createClient(AccountService, transport),
    files: createClient(FileService, transport),
  };
}
