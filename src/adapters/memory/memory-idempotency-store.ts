import { randomUUID } from "node:crypto";
import type { ClaimOutcome, IdempotencyStore, StoredResponse } from "../../ports/idempotency-store.js";

interface Entry {
  fingerprint: string;
  token: string;
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
    const token = randomUUID();
    this.entries.set(id, { fingerprint, token, expiresAt: this.now() + ttlMs });
    this.sweep();
    return { kind: "claimed", token };
  }

  async complete(scope: string, key: string, token: string, response: StoredResponse, ttlMs: number): Promise<void> {
    const entry = this.entries.get(`${scope}\u0000${key}`);
    if (entry?.token === token) Object.assign(entry, { response, expiresAt: this.now() + ttlMs });
  }

  async abandon(scope: string, key: string, token: string): Promise<void> {
    const id = `${scope}\u0000${key}`;
    if (this.entries.get(id)?.token === token) this.entries.delete(id);
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
