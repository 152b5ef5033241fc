import type { KeyLimits } from "../../domain/accounts/key-limits.js";
import type { ApiKeyRecord, ApiKeyStore } from "../../ports/api-key-store.js";

export class MemoryApiKeyStore implements ApiKeyStore {
  private readonly byHash = new Map<string, ApiKeyRecord>();
  private readonly hashById = new Map<string, string>();

  async create(record: ApiKeyRecord): Promise<void> {
    this.byHash.set(record.secretHash, record);
    this.hashById.set(record.keyId, record.secretHash);
  }

  async findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    return this.byHash.get(secretHash);
  }

  async revoke(keyId: string): Promise<boolean> {
    const hash = this.hashById.get(keyId);
    const record = hash && this.byHash.get(hash);
    if (!hash || !record) return false;
    this.byHash.set(hash, { ...record, revoked: true });
    return true;
  }

  async get(keyId: string): Promise<ApiKeyRecord | undefined> {
    const hash = this.hashById.get(keyId);
    return hash === undefined ? undefined : this.byHash.get(hash);
  }

  async setLimits(keyId: string, limits: KeyLimits): Promise<boolean> {
    const hash = this.hashById.get(keyId);
    const record = hash && this.byHash.get(hash);
    if (!hash || !record) return false;
    this.byHash.set(hash, { ...record, limits });
    return true;
  }

  async listByAccount(accountId: string): Promise<ApiKeyRecord[]> {
    return [...this.byHash.values()]
      .filter((record) => record.accountId === accountId)
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.keyId.localeCompare(b.keyId));
  }
}
