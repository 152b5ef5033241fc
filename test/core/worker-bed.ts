import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig, type Config } from "../../src/config/config.js";
import type { CoreDeps } from "../../src/core/core-deps.js";
import { acceptJob } from "../../src/core/jobs/accept-job.js";
import type { WorkerOptions } from "../../src/core/workers/generation-worker.js";
import type { Job } from "../../src/domain/jobs/job.js";
import type { Money } from "../../src/domain/money.js";
import { validateGenerationRequest } from "../../src/domain/validation/generation-request.js";
import { TOPICS } from "../../src/ports/event-bus.js";
import { openBackends } from "../../src/runtime/backends.js";
import { loadServiceSettings } from "../../src/runtime/settings.js";
import { createCore } from "../../src/runtime/core.js";
import { captureLog, type LogLine } from "../support/capture-log.js";
import { createObservability } from "../../src/runtime/observability.js";

/*
 * The core's real ports (SQLite in a temporary DATA_DIR with its durable
 * in-process bus, or the memory stores; the simulated provider; the disk
 * blob store), as the runtime opens them, with no consumers started: a test
 * creates the generation workers itself and drives them.
 */

export type EmbeddedStore = "sqlite" | "memory";

export interface WorkerBed {
  readonly deps: CoreDeps;
  readonly config: Config;
  /** Everything the core logged for the operator. */
  readonly logged: LogLine[];
  /** A worker's options: short lease and reaper interval, nothing re-announced on its own. */
  workerOptions(workerId: string, overrides?: Partial<WorkerOptions>): WorkerOptions;
  /** An account with `balance`, and a text job accepted for it as the service accepts one (hold, stored queued, announced). */
  acceptTextJob(balance: Money, prompt?: string): Promise<Job>;
  close(): Promise<void>;
}

export async function openWorkerBed(store: EmbeddedStore): Promise<WorkerBed> {
  const dataDir = await mkdtemp(join(tmpdir(), `worker-bed-${store}-`));
  const config = loadConfig({
    HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", ADMIN_TOKEN: "worker-bed-admin-token-0123456789abcdef", DATA_DIR: dataDir, LOG_LEVEL: "silent",
    EMBEDDED_STORE: store, SIMULATED_LATENCY_MS: "0", SIMULATED_RENDER_THREADS: "0",
  });
  const log = captureLog("info");
  const logged = log.lines;
  const observability = createObservability(log.logger, false);
  const settings = loadServiceSettings(config);
  const backends = await openBackends(settings, observability, (_dependency, open) => open());
  const { deps } = createCore(settings, backends.ports, "http://127.0.0.1:1", undefined, observability);
  const announce = (jobId: string) => deps.bus.publish(TOPICS.generationRequested, jobId, { jobId });
  return {
    deps,
    config,
    logged,
    workerOptions: (workerId, overrides = {}) => ({
      workerId, leaseMs: 30_000, concurrency: 4, reaperIntervalMs: 60_000, requeueAfterMs: 3_600_000, textCallLimitMs: 3_600_000,
      ...overrides,
    }),
    async acceptTextJob(balance, prompt = "a haiku about harbours") {
      const accountId = `acct-${randomUUID()}`;
      await deps.ledger.createAccount(accountId, "worker test", balance);
      const spec = validateGenerationRequest(
        { model: "aimodel-3.5-flash-lite", prompt, inputImagesUrls: [], inputImagesBase64: [] }, config.limits,
      );
      return acceptJob(deps, announce, { keyId: "key-1", accountId, models: ["*"], limits: {} }, randomUUID(), spec);
    },
    async close() {
      await backends.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
