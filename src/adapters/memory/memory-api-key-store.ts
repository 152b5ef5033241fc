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
}
