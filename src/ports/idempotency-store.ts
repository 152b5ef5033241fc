/** What a completed request answered, replayed to later duplicates. */
export interface StoredResponse {
  readonly jobId: string;
}

export type ClaimOutcome =
  /** `token` proves ownership: only the claimant can complete, give back or hand over the key. */
  | { readonly kind: "claimed"; readonly token: string }
  /**
   * Another request holds the key and has not completed it. `pending` is the
   * response that request will answer (its job id, chosen before the claim),
   * so a retry can tell whether that acceptance stored its job.
   */
  | {
      readonly kind: "in_progress";
      readonly fingerprint: string;
      readonly token: string;
      readonly pending: StoredResponse;
      readonly claimedAt: Date;
    }
  | { readonly kind: "completed"; readonly fingerprint: string; readonly response: StoredResponse };

/**
 * Idempotency keys, scoped by account. A claim is atomic: of concurrent
 * claims of one key exactly one gets "claimed". A claim names the job id it
 * will create before anything is created, and lives as long as the key
 * (`ttlMs`), so the key and the job it stands for can never drift apart.
 */
export interface IdempotencyStore {
  claim(scope: string, key: string, fingerprint: string, pending: StoredResponse, ttlMs: number): Promise<ClaimOutcome>;
  /**
   * Hands a claim whose acceptance died to a new request: applied only while
   * `token` still owns an uncompleted claim (then "claimed" with a new token,
   * `pending` and claimedAt = now); otherwise the key's current outcome, or a
   * fresh claim when the key is gone.
   */
  takeOver(scope: string, key: string, token: string, fingerprint: string, pending: StoredResponse, ttlMs: number): Promise<ClaimOutcome>;
  /** Records the response, if `token` still owns the key. Throws when it does not. */
  complete(scope: string, key: string, token: string, response: StoredResponse, ttlMs: number): Promise<void>;
  /** A rejected request does not consume its key (given back only by its owner). */
  abandon(scope: string, key: string, token: string): Promise<void>;
  /** Drops keys past their expiry; stores whose keys expire by themselves (a TTL) return 0. */
  purgeExpired(now: Date): Promise<number>;
}
