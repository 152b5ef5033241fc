/** What a completed request answered, replayed to later duplicates. */
export interface StoredResponse {
  readonly jobId: string;
}

export type ClaimOutcome =
  | { readonly kind: "claimed" }
  | { readonly kind: "in_progress"; readonly fingerprint: string }
  | { readonly kind: "completed"; readonly fingerprint: string; readonly response: StoredResponse };

/**
 * Idempotency keys, scoped by account. A claim is atomic: of concurrent
 * claims of one key exactly one gets "claimed".
 */
export interface IdempotencyStore {
  /** `ttlMs` bounds how long even an unfinished claim can hold the key. */
  claim(scope: string, key: string, fingerprint: string, ttlMs: number): Promise<ClaimOutcome>;
  complete(scope: string, key: string, response: StoredResponse, ttlMs: number): Promise<void>;
  /** A rejected request does not consume its key. */
  abandon(scope: string, key: string): Promise<void>;
}
