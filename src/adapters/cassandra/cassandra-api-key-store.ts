import type { ApiKeyRecord, ApiKeyStore } from "../../ports/api-key-store.js";
import type { CassandraClient } from "./cassandra-session.js";

export class CassandraApiKeyStore implements ApiKeyStore {
  constructor(private readonly client: CassandraClient) {}

  async create(record: ApiKeyRecord): Promise<void> {
    await this.client.execute(
      "INSERT INTO api_keys_by_hash (secret_hash, key_id, account_id, models, revoked, created_at) VALUES (?, ?, ?, ?, ?, ?)",
      [record.secretHash, record.keyId, record.accountId, [...record.models], record.revoked, record.createdAt],
    );
    await this.client.execute("INSERT INTO api_keys (key_id, secret_hash) VALUES (?, ?)", [record.keyId, record.secretHash]);
  }

  async findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const row = (
      await this.client.execute(
        "SELECT secret_hash, key_id, account_id, models, revoked, created_at FROM api_keys_by_hash WHERE secret_hash = ?",
        [secretHash],
      )
    ).first();
    if (!row) return undefined;
    return {
      secretHash: row.secret_hash,
      keyId: row.key_id,
      accountId: row.account_id,
      models: row.models ?? [],
      revoked: row.revoked === true,
      createdAt: row.created_at,
    };
  }

  async revoke(keyId: string): Promise<boolean> {
    const row = (await this.client.execute("SELECT secret_hash FROM api_keys WHERE key_id = ?", [keyId])).first();
    if (!row) return false;
    await this.client.execute("UPDATE api_keys_by_hash SET revoked = true WHERE secret_hash = ?", [row.secret_hash]);
    return true;
  }
}
