import { randomUUID } from "node:crypto";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { GenerationService, InputMode } from "../../../gen/generation/v1/generation_service_pb.js";
import { JobStatus } from "../../../gen/generation/v1/job_pb.js";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { ModelKind } from "../../../gen/generation/v1/model_pb.js";
import { FULL_ASPECT_RATIOS } from "../../domain/catalog/aspect-ratios.js";
import { MODELS, previewAliases, type ModelKind as DomainKind } from "../../domain/catalog/models.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import { encodePageToken, parseJobListQuery } from "../../domain/jobs/job-list.js";
import { formatModelPrices } from "../../domain/pricing/price-table.js";
import {
  checkGenerationSize, requireKnownModel, validateGenerationRequest, type GenerationRequestInput, type GenerationSpec, type InputMode as DomainInputMode,
} from "../../domain/validation/generation-request.js";
import { checkVideoInteractionSize, validateVideoInteraction } from "../../domain/validation/video-interaction.js";
import type { ValidationLimits } from "../../domain/validation/limits.js";
import { authenticate, requireGrant, type Caller } from "../auth/api-key-auth.js";
import type { CoreDeps } from "../core-deps.js";
import { toRpcError } from "../errors/rpc-errors.js";
import { cancelOwnJob, cancelUnanswered } from "../jobs/cancel-job.js";
import { waitForEnd, watchJob } from "../jobs/watch-job.js";
import { checkWaitSeconds, seenUpTo } from "../../domain/jobs/job-events.js";
import { acceptJob, type Announce } from "../jobs/accept-job.js";
import { inlineImageDigest, STAGED_IMAGES } from "../jobs/inline-staging.js";
import { requireAvailable } from "../jobs/availability.js";
import { bareKey, idempotent } from "../jobs/idempotent.js";
import { ANSWER_DELIVERY } from "../jobs/answer-delivery.js";
import { abandonIntent, refusalError } from "../money/holds.js";
import { replayAdmission } from "../../domain/accounts/key-limits.js";
import { staleBefore } from "../jobs/stale.js";
import { jobView, STATUS_TO_PROTO } from "../jobs/job-view.js";
import { balanceView } from "./balance-view.js";
import { statementPage, usageReport } from "../money/statement.js";

const INPUT_MODES: Record<InputMode, DomainInputMode> = {
  [InputMode.UNSPECIFIED]: "any",
  [InputMode.TEXT_ONLY]: "text_only",
  [InputMode.IMAGE_URLS]: "image_urls",
};

export const KIND_TO_PROTO: Record<DomainKind, ModelKind> = {
  image: ModelKind.IMAGE,
  text: ModelKind.TEXT,
  video: ModelKind.VIDEO,
  multimodal_realtime: ModelKind.MULTIMODAL_REALTIME,
};

/** The domain's name of a status filter; an undefined enum number passes as itself, for the domain to refuse. */
const STATUS_FILTER = new Map<number, string>(Object.entries(STATUS_TO_PROTO).map(([name, value]) => [value, name]));
const statusFilter = (status: JobStatus) => (status === JobStatus.UNSPECIFIED ? undefined : (STATUS_FILTER.get(status) ?? String(status)));

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function createGenerationService(deps: CoreDeps, announce: Announce): ServiceImpl<typeof GenerationService> {
  const settings = deps.settingsOf;

  /**
   * Shared by both creation RPCs. Order: key (401), model (422), grant (403),
   * pause (503), then the full rules (400/422), then money (402). A replay of
   * an Idempotency-Key passes the same key, model, grant and pause checks, and
   * the key's spend limits must cover the job's price (replayAdmission).
   */
  async function create(
    caller: Caller, operation: string, request: object, key: string, modelId: string,
    validate: (limits: ValidationLimits) => GenerationSpec,
  ) {
    // Before the key is looked at: a replay is answered only to a caller who may make the request.
    const model = requireKnownModel(modelId);
    requireGrant(caller, model);
    await requireAvailable(deps.settings, model, settings.retryAfterSeconds);
    const outcome = await idempotent(
      deps.idempotency,
      deps,
      {
        scope: caller.accountId, key, operation, request, ttlMs: settings.idempotencyTtlMs, retryAfterSeconds: 1,
        staleBefore: staleBefore(settings, deps.clock.now()),
      },
      {
        newResponse: () => ({ jobId: randomUUID() }),
        accept: async (pending) => {
          // The route chosen now decides the input-image limit and is where the job goes first.
          const plan = await deps.provider.planRoute(model);
          const spec = validate({ ...settings.limits, maxInputImages: plan.maxInputImages });
          const job = await acceptJob(deps, announce, caller, pending.jobId, spec, plan.route);
          return { jobId: job.id };
        },
        resolveDead: async (pending) => {
          if (await deps.jobs.get(pending.jobId)) return "stored";
          return (await abandonIntent(deps, caller.accountId, pending.jobId)) ? "gone" : "stored";
        },
      },
    );
    if (outcome.replayed) await requireReplayAdmitted(caller, outcome.response.jobId);
    // A 202 means stored: on disk before it is sent.
    await deps.durability.flush();
    return outcome;
  }

  /** A replay to a key whose spend limits could never have reserved the job is refused as a new request would be. */
  async function requireReplayAdmitted(caller: Caller, jobId: string) {
    const job = await deps.jobs.get(jobId);
    const refusal = job && replayAdmission(caller.limits, job.reserved);
    if (refusal) throw refusalError({ key: refusal }, job.reserved);
  }

  /**
   * The answer to an accepted job. With `waitSeconds`, the job itself once it
   * finished, when that happens within the wait (a replayed request waits too).
   * While it is being made, a job whose answer cannot reach its client is canceled (cancelIfUnanswered).
   */
  const accepted = async (
    caller: Caller, outcome: { response: { jobId: string }; replayed: boolean }, idempotencyKey: string,
    waitSeconds: number | undefined, context: HandlerContext,
  ) => {
    const handled = cancelIfUnanswered(context, idempotencyKey, outcome);
    try {
      const { jobId } = outcome.response;
      const finished = waitSeconds ? await waitForEnd(deps, caller.accountId, jobId, waitSeconds * 1000, context.signal) : undefined;
      return {
        jobId,
        status: JobStatus.QUEUED,
        statusUrl: `/api/v1/jobs/${jobId}`,
        replayed: outcome.replayed,
        job: finished && jobView(finished, settings, deps.clock.now()),
      };
    } finally {
      handled();
    }
  };

  /**
   * Spec §7 rule 2 (nothing is billed for a request interrupted before a
   * response): a job accepted without an Idempotency-Key whose answer does
   * not reach its client (the call's signal aborts while the handler runs,
   * or its transport reports the answer undelivered) is canceled, its hold
   * released (cancelUnanswered): that client has no way to find it. With a
   * key the job stays; the retry with the key finds it. Returns what to call
   * once the handler is done (its signal no longer speaks for the answer).
   */
  function cancelIfUnanswered(context: HandlerContext, idempotencyKey: string, outcome: { response: { jobId: string }; replayed: boolean }) {
    if (outcome.replayed || bareKey(idempotencyKey) !== "") return () => {};
    const { jobId } = outcome.response;
    let canceling = false;
    const cancel = () => {
      if (canceling) return;
      canceling = true;
      cancelUnanswered(deps, jobId).catch((error: unknown) =>
        deps.logger.error({ job_id: jobId, err: error }, "a job whose acceptance was not answered could not be canceled; it runs and is billed"),
      );
    };
    context.values.get(ANSWER_DELIVERY)?.onUndelivered(cancel);
    const signal = context.signal;
    if (signal.aborted) cancel();
    else signal.addEventListener("abort", cancel, { once: true });
    return () => signal.removeEventListener("abort", cancel);
  }

  /** One of the caller's jobs, or 404: another account's job is indistinguishable from an unknown one. */
  async function ownJob(caller: Caller, jobId: string) {
    const job = UUID.test(jobId) ? await deps.jobs.get(jobId.toLowerCase()) : undefined;
    if (!job || job.accountId !== caller.accountId) {
      throw new DomainError("not_found", "job_not_found", `no job ${jobId}`);
    }
    return job;
  }

  return {
    createGeneration: async (request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      const input: GenerationRequestInput = {
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
      // Prompt and metadata sizes first and cheaply: before the request is fingerprinted or read any further.
      checkGenerationSize(input, settings.limits);
      const waitSeconds = checkWaitSeconds(request.waitSeconds);
      // How long to wait is not part of what is asked: a retry may wait differently.
      const { idempotencyKey, waitSeconds: _wait, ...rest } = request;
      // Images by digest: the same request fingerprints alike whether its images arrived staged or inline.
      const imageDigests = [...(input.stagedImages ?? []).map((image) => image.digest), ...request.inputImagesBase64.map(inlineImageDigest)];
      const fingerprinted = { ...rest, inputImagesBase64: imageDigests };
      const outcome = await create(caller, "generations", fingerprinted, idempotencyKey, request.model, (limits) =>
        validateGenerationRequest(input, limits),
      );
      return accepted(caller, outcome, idempotencyKey, waitSeconds, context);
    },

    createVideoInteraction: async (request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      checkVideoInteractionSize(request, settings.limits);
      const { idempotencyKey, ...fingerprinted } = request;
      const outcome = await create(caller, "interactions", fingerprinted, idempotencyKey, request.model, (limits) =>
        validateVideoInteraction({
          model: request.model,
          instances: request.instances,
          parameters: { durationSeconds: request.parameters?.durationSeconds },
        }, limits),
      );
      return accepted(caller, outcome, idempotencyKey, undefined, context);
    },

    getJob: async (request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      const job = await ownJob(caller, request.jobId);
      return { job: jobView(job, settings, deps.clock.now()) };
    },

    cancelJob: async (request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      const job = await ownJob(caller, request.jobId);
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
        if (!UUID.test(request.jobId)) throw new DomainError("not_found", "job_not_found", `no job ${request.jobId}`);
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

    listJobs: async (request, context) => {
      const caller = await authenticate(context.requestHeader, deps);
      // Every rule (bounds, filters, the token's integrity) is the domain's; the store only reads.
      const query = parseJobListQuery(settings.urlSigningSecret, caller.accountId, {
        status: statusFilter(request.status),
        model: request.model === "" ? undefined : request.model,
        createdAfter: request.createdAfter && timestampDate(request.createdAfter),
        createdBefore: request.createdBefore && timestampDate(request.createdBefore),
        limit: request.limit,
        pageToken: request.pageToken === "" ? undefined : request.pageToken,
      });
      const page = await deps.jobs.listByAccount(query);
      const now = deps.clock.now();
      return {
        jobs: page.jobs.map((job) => jobView(job, settings, now)),
        nextPageToken: page.next ? encodePageToken(settings.urlSigningSecret, caller.accountId, query, page.next) : "",
      };
    },

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
      const snapshot = await deps.ledger.balance(caller.accountId);
      if (!snapshot) throw new DomainError("unauthenticated", "inactive_account", "the key's account no longer exists");
      return { balance: balanceView(snapshot) };
    },

    listModels: async () => {
      const [prices, paused] = await Promise.all([deps.settings.prices(), deps.settings.pausedModels()]);
      return {
        aspectRatios: [...FULL_ASPECT_RATIOS],
        models: MODELS.map((model) => ({
          id: model.id,
          kind: KIND_TO_PROTO[model.kind],
          resolutions: [...model.resolutions],
          aspectRatios: [...model.aspectRatios],
          aliases: previewAliases(model),
          price: { model: model.id, ...priceMessage(formatModelPrices(prices.get(model.id))) },
          paused: paused.has(model.id),
          maxOutputTokens: model.maxOutputTokens ?? 0,
          durationsSeconds: [...(model.jobDurations ?? [])],
          explicitGrantRequired: model.needsExplicitGrant === true,
        })),
      };
    },
  };
}

export function priceMessage(text: ReturnType<typeof formatModelPrices>) {
  return {
    perImage: text.per_image,
    perSecond: text.per_second,
    inputPerMillionTokens: text.input_per_million_tokens,
    outputPerMillionTokens: text.output_per_million_tokens,
    videoOutputPerMillionTokens: text.video_output_per_million_tokens,
  };
}
