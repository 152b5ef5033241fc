import { randomUUID } from "node:crypto";
import { replayAdmission } from "../../domain/accounts/key-limits.js";
import { requireKnownModel, type GenerationSpec } from "../../domain/validation/generation-request.js";
import type { ValidationLimits } from "../../domain/validation/limits.js";
import { requireGrant, type Caller } from "../auth/api-key-auth.js";
import type { CoreDeps } from "../core-deps.js";
import { abandonIntent, refusalError } from "../money/holds.js";
import { acceptJob, type Announce } from "./accept-job.js";
import { requireAvailable } from "./availability.js";
import { idempotent, type IdempotentOutcome } from "./idempotent.js";
import { staleBefore } from "./stale.js";

/** A creation request as both creation RPCs hand it over: what it asks, under which Idempotency-Key, and its full rules. */
export interface Creation {
  /** The idempotency operation the key is scoped to ("generations", "interactions"). */
  readonly operation: string;
  /** What the request asks, as its key's fingerprint reads it. */
  readonly request: object;
  readonly idempotencyKey: string;
  readonly modelId: string;
  /** The request's full rules, under the limits of the route chosen for it. */
  readonly validate: (limits: ValidationLimits) => GenerationSpec;
}

/**
 * Shared by both creation RPCs. Order: key (401), model (422), grant (403),
 * pause (503), then the full rules (400/422), then money (402). A replay of
 * an Idempotency-Key passes the same key, model, grant and pause checks, and
 * the key's spend limits must cover the job's price (replayAdmission).
 */
export async function admitJob(
  deps: CoreDeps, announce: Announce, caller: Caller, { operation, request, idempotencyKey, modelId, validate }: Creation,
): Promise<IdempotentOutcome> {
  const settings = deps.settingsOf;
  // Before the key is looked at: a replay is answered only to a caller who may make the request.
  const model = requireKnownModel(modelId);
  requireGrant(caller, model);
  await requireAvailable(deps.settings, model, settings.retryAfterSeconds);
  const outcome = await idempotent(
    deps.idempotency,
    deps,
    {
      scope: caller.accountId, key: idempotencyKey, operation, request, ttlMs: settings.idempotencyTtlMs, retryAfterSeconds: 1,
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
  if (outcome.replayed) await requireReplayAdmitted(deps, caller, outcome.response.jobId);
  // A 202 means stored: on disk before it is sent.
  await deps.durability.flush();
  return outcome;
}

/** A replay to a key whose spend limits could never have reserved the job is refused as a new request would be. */
async function requireReplayAdmitted(deps: Pick<CoreDeps, "jobs">, caller: Caller, jobId: string) {
  const job = await deps.jobs.get(jobId);
  const refusal = job && replayAdmission(caller.limits, job.reserved);
  if (refusal) throw refusalError({ key: refusal }, job.reserved);
}
