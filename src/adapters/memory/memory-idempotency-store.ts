import { randomUUID } from "node:crypto";
import type { ClaimOutcome, IdempotencyStore, StoredResponse } from "../../ports/idempotency-store.js";

interface Entry {
  fingerprint: string;
  token: string;
  pending: StoredResponse;
  claimedAt: number;
  response?: StoredResponse;
  expiresAt: number;
}

/**
 * Idempotency keys in memory. Each method checks and changes state without
 * awaiting in between, so on one event loop a claim is atomic. A key past its
 * expiry is absent; purgeExpired (and, at most once a minute, a claim) drops it.
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly now: () => number = Date.now) {}

  async claim(scope: string, key: string, fingerprint: string, pending: StoredResponse, ttlMs: number): Promise<ClaimOutcome> {
    const existing = this.live(scope, key);
    if (existing) return outcomeOf(existing);
    const outcome = this.fresh(scope, key, fingerprint, pending, ttlMs);
    this.sweep();
    return outcome;
  }

  async takeOver(
    scope: string, key: string, token: string, fingerprint: string, pending: StoredResponse, ttlMs: number,
  ): Promise<ClaimOutcome> {
    const existing = this.live(scope, key);
    if (existing && (existing.response || existing.token !== token)) return outcomeOf(existing);
    return this.fresh(scope, key, fingerprint, pending, ttlMs);
  }

  async complete(scope: string, key: string, token: string, response: StoredResponse, ttlMs: number): Promise<void> {
    const entry = this.live(scope, key);
    if (entry?.token !== token) throw new Error(`Idempotency-Key ${key} is no longer owned by this request`);
    Object.assign(entry, { response, expiresAt: this.now() + ttlMs });
  }

  /** Only an uncompleted claim is given back: a completed key stands for a stored job. */
  async abandon(scope: string, key: string, token: string): Promise<void> {
    const entry = this.live(scope, key);
    if (entry?.token === token && !entry.response) this.entries.delete(idOf(scope, key));
  }

  async purgeExpired(now: Date): Promise<number> {
    let removed = 0;
    for (const [id, entry] of this.entries) {
      if (entry.expiresAt <= now.getTime()) {
        this.entries.delete(id);
        removed++;
      }
    }
    return removed;
  }

  /** The key's entry unless it expired. */
  private live(scope: string, key: string): Entry | undefined {
    const entry = this.entries.get(idOf(scope, key));
    return entry && entry.expiresAt > this.now() ? entry : undefined;
  }

  private fresh(scope: string, key: string, fingerprint: string, pending: StoredResponse, ttlMs: number): ClaimOutcome {
    const token = randomUUID();
    const now = this.now();
    this.entries.set(idOf(scope, key), { fingerprint, token, pending, claimedAt: now, expiresAt: now + ttlMs });
    return { kind: "claimed", token };
  }

  private lastSweep = 0;
  /** Expired keys are dropped at most once a minute so memory stays bounded even without purgeExpired. */
  private sweep(): void {
    const now = this.now();
    if (now - this.lastSweep < 60_000) return;
    this.lastSweep = now;
    void this.purgeExpired(new Date(now));
  }
}

const idOf = (scope: string, key: string) => `${scope}\u0000${key}`;

function outcomeOf(entry: Entry): ClaimOutcome {
  if (entry.response) return { kind: "completed", fingerprint: entry.fingerprint, response: entry.response };
  return {
    kind: "in_progress",
    fingerprint: entry.fingerprint,
    token: entry.token,
    pending: entry.pending,
    claimedAt: new Date(entry.claimedAt),
  };
}
