import pRetry from "p-retry";
import { DomainError } from "../../domain/errors/domain-error.js";
import { requestFingerprint } from "../../domain/idempotency/fingerprint.js";
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from "../health/readiness.js";
import type { ClaimOutcome, IdempotencyStore, StoredResponse } from "../../ports/idempotency-store.js";
import type { Logger } from "../../ports/logger.js";
import type { Telemetry } from "../../ports/telemetry.js";
import { retryingEveryError } from "../../shared/every-error.js";

export interface IdempotentOutcome {
  readonly response: StoredResponse;
  readonly replayed: boolean;
}

export interface IdempotencyOptions {
  readonly scope: string;
  readonly key: string;
  readonly operation: string;
  readonly request: unknown;
  readonly ttlMs: number;
  readonly retryAfterSeconds: number;
  /**
   * A claim made before this instant that is still not completed belongs to
   * an acceptance that died (or overran its time): a retry resolves it.
   */
  readonly staleBefore: Date;
}

/** How a request is accepted under a key, and how a dead acceptance's pending response is resolved. */
export interface IdempotentWork {
  /** The response a new acceptance will give (its job id), named in the claim before anything is created. */
  newResponse(): StoredResponse;
  accept(pending: StoredResponse): Promise<StoredResponse>;
  /**
   * Decides a dead acceptance's fate for good: "stored" when its job exists
   * (it is replayed), "gone" when it was fenced off and can never appear (the
   * key is taken over and a new job is created).
   */
  resolveDead(pending: StoredResponse): Promise<"stored" | "gone">;
}

/**
 * The work failed in a way that leaves its result unknown (the store went
 * away mid-write): the claim stays, so a retry resolves the acceptance for
 * good (replays its job if it was stored, fences it off otherwise), and the
 * reaper releases the hold of a job that never appeared. Answers 503.
 */
export class OutcomeUnknown extends DomainError {
  constructor(dependency: string, options?: { cause?: unknown }) {
    super("unavailable", "service_unavailable", `${dependency} is unavailable; retry with the same Idempotency-Key`, { dependency },
      UNAVAILABLE_RETRY_AFTER_SECONDS);
    if (options?.cause !== undefined) Object.defineProperty(this, "cause", { value: options.cause });
  }
}

const MAX_KEY_LENGTH = 255;

/** An Idempotency-Key as sent, bare or as an RFC 8941 string; "" when none was sent. */
export const bareKey = (key: string) => key.replace(/^"(.*)"$/, "$1");
/** Rounds of resolving and re-reading a contested key before answering 409. */
const MAX_ROUNDS = 4;

/**
 * The Idempotency-Key rule (IETF draft): a completed key replays its
 * response, a key still being accepted is a 409, the same key with another
 * request is a 422, and a request that fails gives its key back. The claim
 * names its job id before the job exists and lives as long as the key, so a
 * retry after a crashed acceptance finds either that job (and replays it) or
 * fences it off and creates one: never both.
 */
export async function idempotent(
  store: IdempotencyStore,
  observers: { readonly logger: Logger; readonly telemetry: Telemetry },
  options: IdempotencyOptions,
  work: IdempotentWork,
): Promise<IdempotentOutcome> {
  const key = bareKey(options.key);
  if (!key) return { response: await work.accept(work.newResponse()), replayed: false };
  if (key.length > MAX_KEY_LENGTH) {
    throw new DomainError("invalid", "invalid_idempotency_key", `Idempotency-Key may be at most ${MAX_KEY_LENGTH} characters`);
  }
  const { scope, ttlMs } = options;
  const fingerprint = requestFingerprint(options.operation, options.request);
  let pending = work.newResponse();
  let claim: ClaimOutcome = await store.claim(scope, key, fingerprint, pending, ttlMs);
  for (let round = 0; claim.kind !== "claimed"; round++) {
    if (claim.fingerprint !== fingerprint) {
      observers.telemetry.observe({ kind: "idempotency", outcome: "reused" });
      throw new DomainError("invalid", "idempotency_key_reused", "this Idempotency-Key was used with a different request");
    }
    if (claim.kind === "completed") {
      observers.telemetry.observe({ kind: "idempotency", outcome: "replayed" });
      return { response: claim.response, replayed: true };
    }
    if (claim.claimedAt.getTime() >= options.staleBefore.getTime() || round >= MAX_ROUNDS) {
      observers.telemetry.observe({ kind: "idempotency", outcome: "in_use" });
      throw new DomainError(
        "conflict", "idempotency_key_in_use", "a request with this Idempotency-Key is still being accepted; retry shortly", {},
        options.retryAfterSeconds,
      );
    }
    // The acceptance holding the key is dead: its job either exists (replay it) or is fenced off for good.
    const stale = claim;
    if ((await work.resolveDead(stale.pending)) === "stored") {
      try {
        await store.complete(scope, key, stale.token, stale.pending, ttlMs);
        observers.telemetry.observe({ kind: "idempotency", outcome: "replayed" });
        return { response: stale.pending, replayed: true };
      } catch {
        claim = await store.claim(scope, key, fingerprint, pending, ttlMs); // moved meanwhile: look again
        continue;
      }
    }
    pending = work.newResponse();
    claim = await store.takeOver(scope, key, stale.token, fingerprint, pending, ttlMs);
  }
  const token = claim.token;
  let response: StoredResponse;
  try {
    response = await work.accept(pending);
  } catch (error) {
    // A request that failed gives its key back, unless its job may exist after all: then the claim
    // stays, and a retry resolves it through the pending job id.
    if (!(error instanceof OutcomeUnknown)) {
      await store.abandon(scope, key, token).catch((abandonError) =>
        observers.logger.warn({ account_id: scope, err: abandonError }, "giving back an Idempotency-Key failed; it frees when its claim goes stale"),
      );
    }
    throw error;
  }
  // The job exists now: its key must never be given back, so recording it is tried three times
  // at once, and a failure is logged rather than turned into an error the client would retry (a
  // retry then finds the stored job through the claim's pending id and replays it).
  await pRetry(retryingEveryError(() => store.complete(scope, key, token, response, ttlMs)), { retries: 2, minTimeout: 0 }).catch((error) =>
    observers.logger.error({ job_id: response.jobId, account_id: scope, err: error }, "the Idempotency-Key of an accepted job could not be recorded as complete"),
  );
  return { response, replayed: false };
}
