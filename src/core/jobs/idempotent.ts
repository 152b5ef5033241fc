import { DomainError } from "../../domain/errors/domain-error.js";
import { requestFingerprint } from "../../domain/idempotency/fingerprint.js";
import type { IdempotencyStore, StoredResponse } from "../../ports/idempotency-store.js";

export interface IdempotentOutcome {
  readonly response: StoredResponse;
  readonly replayed: boolean;
}

const MAX_KEY_LENGTH = 255;

/**
 * The Idempotency-Key rule (IETF draft): a completed key replays its
 * response, a key still being accepted is a 409, the same key with another
 * request is a 422, and a request that fails gives its key back.
 */
export async function idempotent(
  store: IdempotencyStore,
  log: (message: string, error?: unknown) => void,
  options: { scope: string; key: string; operation: string; request: unknown; ttlMs: number; retryAfterSeconds: number },
  accept: () => Promise<StoredResponse>,
): Promise<IdempotentOutcome> {
  const key = options.key.replace(/^"(.*)"$/, "$1");
  if (!key) return { response: await accept(), replayed: false };
  if (key.length > MAX_KEY_LENGTH) {
    throw new DomainError("invalid", "invalid_idempotency_key", `Idempotency-Key may be at most ${MAX_KEY_LENGTH} characters`);
  }
  const fingerprint = requestFingerprint(options.operation, options.request);
  const claim = await store.claim(options.scope, key, fingerprint, options.ttlMs);
  if (claim.kind !== "claimed") {
    if (claim.fingerprint !== fingerprint) {
      throw new DomainError("invalid", "idempotency_key_reused", "this Idempotency-Key was used with a different request");
    }
    if (claim.kind === "completed") return { response: claim.response, replayed: true };
    throw new DomainError(
      "conflict", "idempotency_key_in_use", "a request with this Idempotency-Key is still being accepted; retry shortly", {},
      options.retryAfterSeconds,
    );
  }
  let response: StoredResponse;
  try {
    response = await accept();
  } catch (error) {
    await store.abandon(options.scope, key, claim.token);
    throw error;
  }
  // The job exists now: its key must never be given back, so recording it is retried, and a
  // failure is logged rather than turned into an error the client would retry.
  for (let attempt = 1; ; attempt++) {
    try {
      await store.complete(options.scope, key, claim.token, response, options.ttlMs);
      break;
    } catch (error) {
      if (attempt >= 3) {
        log(`Idempotency-Key of job ${response.jobId} could not be recorded as complete`, error);
        break;
      }
    }
  }
  return { response, replayed: false };
}
