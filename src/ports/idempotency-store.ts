/** What a completed request answered, replayed to later duplicates. */
export interface StoredResponse {
  readonly jobId: string;
}

export type ClaimOutcome =
  /** `token` proves ownership: only the claimant can complete or give back the key. */
  | { readonly kind: "claimed"; readonly token: string }
  | { readonly kind: "in_progress"; readonly fingerprint: string }
  | { readonly kind: "completed"; readonly fingerprint: string; readonly response: StoredResponse };

/**
 * Idempotency keys, scoped by account. A claim is atomic: of concurrent
 * claims of one key exactly one gets "claimed".
 */
export interface IdempotencyStore {
  /** `ttlMs` bounds how long even an unfinished claim can hold the key. */
  claim(scope: string, key: string, fingerprint: string, ttlMs: number): Promise<ClaimOutcome>;
  /** Records the response, if `token` still owns the key. */
  complete(scope: string, key: string, token: string, response: StoredResponse, ttlMs: number): Promise<void>;
  /** A rejected request does not consume its key (given back only by its owner). */
  abandon(scope: string, key: string, token: string): Promise<void>;
}
