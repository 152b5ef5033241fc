import type { ApiKeyRecord, ApiKeyStore, KeyChange } from "../../ports/api-key-store.js";
import type { AuditRecord } from "../../ports/audit-log.js";
import { MemoryAuditLog } from "./memory-audit-log.js";

/** Keys in maps; a change's audit record is appended in the same synchronous step. */
export class MemoryApiKeyStore implements ApiKeyStore {
  private readonly byHash = new Map<string, ApiKeyRecord>();
  private readonly hashById = new Map<string, string>();
  /** A rotated-out secret's hash → its key and when it stops working. */
  private readonly retired = new Map<string, { keyId: string; until: Date }>();

  constructor(private readonly audit = new MemoryAuditLog()) {}

  async create(record: ApiKeyRecord, audit?: AuditRecord): Promise<void> {
    this.byHash.set(record.secretHash, record);
    this.hashById.set(record.keyId, record.secretHash);
    this.audit.append(audit);
  }

  async findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const current = this.byHash.get(secretHash);
    if (current) return current;
    const retired = this.retired.get(secretHash);
    const record = retired && (await this.get(retired.keyId));
    return record ? { ...record, secretExpiresAt: retired.until } : undefined;
  }

  async revoke(keyId: string, audit?: AuditRecord): Promise<boolean> {
    return (await this.replace(keyId, (record) => ({ ...record, revoked: true }), audit)) !== undefined;
  }

  async get(keyId: string): Promise<ApiKeyRecord | undefined> {
    const hash = this.hashById.get(keyId);
    return hash === undefined ? undefined : this.byHash.get(hash);
  }

  async update(keyId: string, change: KeyChange, audit?: AuditRecord): Promise<ApiKeyRecord | undefined> {
    return this.replace(keyId, (record) => ({ ...record, ...change, models: [...(change.models ?? record.models)] }), audit);
  }

  async rotate(keyId: string, newSecretHash: string, previousExpiresAt: Date, audit?: AuditRecord): Promise<ApiKeyRecord | undefined> {
    const hash = this.hashById.get(keyId);
    const record = hash === undefined ? undefined : this.byHash.get(hash);
    if (!record) return undefined;
    for (const [hash, retired] of this.retired) if (retired.keyId === keyId) this.retired.delete(hash);
    this.retired.set(record.secretHash, { keyId, until: previousExpiresAt });
    this.byHash.delete(record.secretHash);
    const rotated = { ...record, secretHash: newSecretHash, previousSecretExpiresAt: previousExpiresAt };
    this.byHash.set(rotated.secretHash, rotated);
    this.hashById.set(keyId, rotated.secretHash);
    this.audit.append(audit);
    return rotated;
  }

  async listByAccount(accountId: string): Promise<ApiKeyRecord[]> {
    return [...this.byHash.values()]
      .filter((record) => record.accountId === accountId)
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.keyId.localeCompare(b.keyId));
  }

  private async replace(keyId: string, change: (record: ApiKeyRecord) => ApiKeyRecord, audit?: AuditRecord): Promise<ApiKeyRecord | undefined> {
    const hash = this.hashById.get(keyId);
    const record = hash && this.byHash.get(hash);
    if (!hash || !record) return undefined;
    const changed = change(record);
    this.byHash.set(hash, changed);
    this.audit.append(audit);
    return changed;
  }
}
