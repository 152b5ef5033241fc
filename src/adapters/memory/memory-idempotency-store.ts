import type { ClaimOutcome, IdempotencyStore, StoredResponse } from "../../ports/idempotency-store.js";

interface Entry {
  fingerprint: string;
  response?: StoredResponse;
  expiresAt: number;
}

export class MemoryIdempotencyStore implements IdempotencyStore {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly now: () => number = Date.now) {}

  async claim(scope: string, key: string, fingerprint: string, ttlMs: number): Promise<ClaimOutcome> {
    const id = `${scope}\u0000${key}`;
    const existing = this.entries.get(id);
    if (existing && existing.expiresAt > this.now()) {
      return existing.response
        ? { kind: "completed", fingerprint: existing.fingerprint, response: existing.response }
        : { kind: "in_progress", fingerprint: existing.fingerprint };
    }
    this.entries.set(id, { fingerprint, expiresAt: this.now() + ttlMs });
    this.sweep();
    return { kind: "claimed" };
  }

  async complete(scope: string, key: string, response: StoredResponse, ttlMs: number): Promise<void> {
    const entry = this.entries.get(`${scope}\u0000${key}`);
    if (entry) Object.assign(entry, { response, expiresAt: this.now() + ttlMs });
  }

  async abandon(scope: string, key: string): Promise<void> {
    this.entries.delete(`${scope}\u0000${key}`);
  }

  private lastSweep = 0;
  /** Expired keys are dropped at most once a minute so memory stays bounded. */
  private sweep(): void {
    const now = this.now();
    if (now - this.lastSweep < 60_000) return;
    this.lastSweep = now;
    for (const [id, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(id);
  }
}
