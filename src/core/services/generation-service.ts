import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { GenerationService, InputMode, type CreateGenerationRequest } from "../../../gen/generation/v1/generation_service_pb.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import {
  checkGenerationSize, validateGenerationRequest, type GenerationRequestInput, type InputMode as DomainInputMode,
} from "../../domain/validation/generation-request.js";
import { checkVideoInteractionSize, validateVideoInteraction } from "../../domain/validation/video-interaction.js";
import { checkWaitSeconds, seenUpTo } from "../../domain/jobs/job-events.js";
import { authenticate, type Caller } from "../auth/api-key-auth.js";
import { modelList } from "../catalog/models.js";
import type { CoreDeps } from "../core-deps.js";
import { toRpcError } from "../errors/rpc-errors.js";
import { acceptedAnswer } from "../jobs/accepted-answer.js";
import { admitJob } from "../jobs/admit-job.js";
import type { Announce } from "../jobs/accept-job.js";
import { cancelOwnJob } from "../jobs/cancel-job.js";
import { inlineImageDigest, STAGED_IMAGES } from "../jobs/inline-staging.js";
import { jobView } from "../jobs/job-view.js";
import { isJobId, jobNotFound, listOwnJobs, ownJob } from "../jobs/own-jobs.js";
import { watchJob } from "../jobs/watch-job.js";
import { statementPage, usageReport } from "../money/statement.js";
import { balanceView } from "./balance-view.js";
import { lowBalanceView } from "../accounts/account-settings.js";

const INPUT_MODES: Record<InputMode, DomainInputMode> = {
  [InputMode.UNSPECIFIED]: "any",
  [InputMode.TEXT_ONLY]: "text_only",
  [InputMode.IMAGE_URLS]: "image_urls",
};

/** A generation request in the domain's words; its inline images staged by the gateway, if any, come with the call. */
function generationInput(request: CreateGenerationRequest, context: HandlerContext): GenerationRequestInput {
  return {
    model: request.model,
    prompt: request.prompt,
    aspectRatio: request.aspectRatio,
    resolution: request.resolution,
    inputImagesUrls: request.inputImagesUrls,
    inputImagesBase64: request.inputImagesBase64,
    stagedImages: context.values.get(STAGED_IMAGES),
    callbackUrl: request.callbackUrl,
    metadata: request.metadata,
    timeout: request.timeout,
    durationSeconds: request.durationSeconds,
    inputMode: INPUT_MODES[request.inputMode],
  };
}

/**
 * What an API key's holder asks (proto: GenerationService): jobs created,
 * read, canceled, watched and listed, the account's money, and the models.
 * Each call is the use case of core/jobs, core/money or core/catalog it names.
 */
export function createGenerationService(deps: CoreDeps, announce: Announce): ServiceImpl<typeof GenerationService> {
  const settings = deps.settingsOf;

  return {
    createGeneration: async (request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      const input = generationInput(request, context);
      // Prompt and metadata sizes first and cheaply: before the request is fingerprinted or read any further.
      checkGenerationSize(input, settings.limits);
      const waitSeconds = checkWaitSeconds(request.waitSeconds);
      // How long to wait is not part of what is asked: a retry may wait differently.
      const { idempotencyKey, waitSeconds: _wait, ...rest } = request;
      // Images by digest: the same request fingerprints alike whether its images arrived staged or inline.
      const imageDigests = [...(input.stagedImages ?? []).map((image) => image.digest), ...request.inputImagesBase64.map(inlineImageDigest)];
      const outcome = await admitJob(deps, announce, caller, {
        operation: "generations", request: { ...rest, inputImagesBase64: imageDigests }, idempotencyKey, modelId: request.model,
        validate: (limits) => validateGenerationRequest(input, limits),
      });
      return acceptedAnswer(deps, caller, outcome, idempotencyKey, waitSeconds, context);
    },

    createVideoInteraction: async (request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      checkVideoInteractionSize(request, settings.limits);
      const { idempotencyKey, ...fingerprinted } = request;
      const outcome = await admitJob(deps, announce, caller, {
        operation: "interactions", request: fingerprinted, idempotencyKey, modelId: request.model,
        validate: (limits) => validateVideoInteraction({
          model: request.model,
          instances: request.instances,
          parameters: { durationSeconds: request.parameters?.durationSeconds },
        }, limits),
      });
      return acceptedAnswer(deps, caller, outcome, idempotencyKey, undefined, context);
    },

    getJob: async (request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      const job = await ownJob(deps.jobs, caller, request.jobId);
      return { job: jobView(job, settings, deps.clock.now()) };
    },

    cancelJob: async (request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      const job = await ownJob(deps.jobs, caller, request.jobId);
      const canceled = await cancelOwnJob(deps, job.id, { workerGraceMs: settings.cancelGraceMs }, context.signal);
      // A 200 says canceled and released: on disk before it is sent.
      await deps.durability.flush();
      return { job: jobView(canceled, settings, deps.clock.now()) };
    },

    async *watchJob(request, context) {
      let caller: Caller;
      try {
        caller = await authenticate(context.requestHeader, deps);
        // Not an id this service gives: unknown, without asking a store (an empty key is not a valid Cassandra key).
        if (!isJobId(request.jobId)) throw jobNotFound(request.jobId);
      } catch (error) {
        throw toRpcError(error);
      }
      const jobId = request.jobId.toLowerCase();
      const events = watchJob(deps, caller.accountId, jobId, seenUpTo(request.lastEventId), { fallbackMs: settings.watchFallbackMs }, context.signal);
      try {
        for await (const { eventId, job } of events) yield { eventId, job: jobView(job, settings, deps.clock.now()) };
      } catch (error) {
        if (context.signal.aborted) return; // the watcher left
        throw toRpcError(error);
      }
    },

    listJobs: async (request, context) => listOwnJobs(deps, await authenticate(context.requestHeader, deps), request),

    listLedgerEntries: async (request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      return statementPage(deps.ledger, settings.urlSigningSecret, caller.accountId, request);
    },

    getUsage: async (request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      return usageReport(deps.ledger, caller.accountId, request, deps.clock.now());
    },

    getBalance: async (_request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      // One read: the money and the low-balance setting and state (decision 0038) come from the account's row.
      const account = await deps.ledger.account(caller.accountId);
      if (!account) throw new DomainError("unauthenticated", "inactive_account", "the key's account no longer exists");
      return { balance: balanceView(account), ...lowBalanceView(account) };
    },

    listModels: () => modelList(deps.settings),
  };
}
