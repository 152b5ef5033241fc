import type { KeyLimits } from "../../domain/accounts/key-limits.js";
import type { ApiKeyRecord, ApiKeyStore } from "../../ports/api-key-store.js";
import { decodeKeyLimits, encodeKeyLimits } from "../shared/key-limits-codec.js";
import type { CassandraClient } from "./cassandra-session.js";

export class CassandraApiKeyStore implements ApiKeyStore {
  constructor(private readonly client: CassandraClient) {}

  async create(record: ApiKeyRecord): Promise<void> {
    await this.client.execute(
      "INSERT INTO api_keys_by_hash (secret_hash, key_id, account_id, models, revoked, created_at, limits, role) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      [
        record.secretHash, record.keyId, record.accountId, [...record.models], record.revoked, record.createdAt,
        encodeKeyLimits(record.limits) || null, record.role ?? "key",
      ],
    );
    await this.client.execute("INSERT INTO api_keys (key_id, secret_hash) VALUES (?, ?)", [record.keyId, record.secretHash]);
    await this.client.execute("INSERT INTO api_keys_by_account (account_id, key_id, secret_hash) VALUES (?, ?, ?)", [
      record.accountId, record.keyId, record.secretHash,
    ]);
  }

  async findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const row = (
      await this.client.execute(
        "SELECT secret_hash, key_id, account_id, models, revoked, created_at, limits, role FROM api_keys_by_hash WHERE secret_hash = ?",
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
      ...(row.limits ? { limits: decodeKeyLimits(row.limits as string) } : {}),
      ...(row.role === "owner" ? { role: "owner" as const } : {}),
    };
  }

  async revoke(keyId: string): Promise<boolean> {
    const row = (await this.client.execute("SELECT secret_hash FROM api_keys WHERE key_id = ?", [keyId])).first();
    if (!row) return false;
    await this.client.execute("UPDATE api_keys_by_hash SET revoked = true WHERE secret_hash = ?", [row.secret_hash]);
    return true;
  }

  async get(keyId: string): Promise<ApiKeyRecord | undefined> {
    const row = (await this.client.execute("SELECT secret_hash FROM api_keys WHERE key_id = ?", [keyId])).first();
    return row ? this.findBySecretHash(row.secret_hash as string) : undefined;
  }

  async setLimits(keyId: string, limits: KeyLimits): Promise<boolean> {
    const row = (await this.client.execute("SELECT secret_hash FROM api_keys WHERE key_id = ?", [keyId])).first();
    if (!row) return false;
    await this.client.execute("UPDATE api_keys_by_hash SET limits = ? WHERE secret_hash = ?", [encodeKeyLimits(limits) || null, row.secret_hash]);
    return true;
  }

  async listByAccount(accountId: string): Promise<ApiKeyRecord[]> {
    const rows = (await this.client.execute("SELECT secret_hash FROM api_keys_by_account WHERE account_id = ?", [accountId])).rows;
    const records = await Promise.all(rows.map((row) => this.findBySecretHash(row.secret_hash as string)));
    return records
      .filter((record): record is ApiKeyRecord => record !== undefined)
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.keyId.localeCompare(b.keyId));
  }
}
