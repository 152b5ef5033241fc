import type { ApiKeyRecord, ApiKeyStore, KeyChange } from "../../ports/api-key-store.js";

export class MemoryApiKeyStore implements ApiKeyStore {
  private readonly byHash = new Map<string, ApiKeyRecord>();
  private readonly hashById = new Map<string, string>();
  /** A rotated-out secret's hash → its key and when it stops working. */
  private readonly retired = new Map<string, { keyId: string; until: Date }>();

  async create(record: ApiKeyRecord): Promise<void> {
    this.byHash.set(record.secretHash, record);
    this.hashById.set(record.keyId, record.secretHash);
  }

  async findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const current = this.byHash.get(secretHash);
    if (current) return current;
    const retired = this.retired.get(secretHash);
    const record = retired && (await this.get(retired.keyId));
    return record ? { ...record, secretExpiresAt: retired.until } : undefined;
  }

  async revoke(keyId: string): Promise<boolean> {
    return (await this.replace(keyId, (record) => ({ ...record, revoked: true }))) !== undefined;
  }

  async get(keyId: string): Promise<ApiKeyRecord | undefined> {
    const hash = this.hashById.get(keyId);
    return hash === undefined ? undefined : this.byHash.get(hash);
  }

  async update(keyId: string, change: KeyChange): Promise<ApiKeyRecord | undefined> {
    return this.replace(keyId, (record) => ({ ...record, ...change, models: [...(change.models ?? record.models)] }));
  }

  async rotate(keyId: string, newSecretHash: string, previousExpiresAt: Date): Promise<ApiKeyRecord | undefined> {
    const record = await this.get(keyId);
    if (!record) return undefined;
    for (const [hash, retired] of this.retired) if (retired.keyId === keyId) this.retired.delete(hash);
    this.retired.set(record.secretHash, { keyId, until: previousExpiresAt });
    this.byHash.delete(record.secretHash);
    const rotated = { ...record, secretHash: newSecretHash, previousSecretExpiresAt: previousExpiresAt };
    await this.create(rotated);
    return rotated;
  }

  async listByAccount(accountId: string): Promise<ApiKeyRecord[]> {
    return [...this.byHash.values()]
      .filter((record) => record.accountId === accountId)
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.keyId.localeCompare(b.keyId));
  }

  private async replace(keyId: string, change: (record: ApiKeyRecord) => ApiKeyRecord): Promise<ApiKeyRecord | undefined> {
    const hash = this.hashById.get(keyId);
    const record = hash && this.byHash.get(hash);
    if (!hash || !record) return undefined;
    const changed = change(record);
    this.byHash.set(hash, changed);
    return changed;
  }
}
