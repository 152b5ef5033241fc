import type { ApiKeyRecord, ApiKeyStore, KeyChange } from "../../ports/api-key-store.js";
import { decodeKeyLimits, encodeKeyLimits } from "../shared/key-limits-codec.js";
import { conditional, type CassandraClient, type Row } from "./cassandra-session.js";

const COLUMNS = "secret_hash, key_id, account_id, models, revoked, created_at, limits, role, name, retired_until, previous_secret_hash, previous_secret_expires_at";

/**
 * API keys on Cassandra: the record in api_keys_by_hash (the lookup of every request, never cached: a change is
 * seen by every process's next request), pointed at by api_keys (by id) and api_keys_by_account (the listing).
 */
export class CassandraApiKeyStore implements ApiKeyStore {
  constructor(private readonly client: CassandraClient) {}

  async create(record: ApiKeyRecord): Promise<void> {
    await this.writeRecord(record);
    await this.client.execute("INSERT INTO api_keys (key_id, secret_hash) VALUES (?, ?)", [record.keyId, record.secretHash]);
    await this.client.execute("INSERT INTO api_keys_by_account (account_id, key_id, secret_hash) VALUES (?, ?, ?)", [
      record.accountId, record.keyId, record.secretHash,
    ]);
  }

  async findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const row = await this.row(secretHash);
    if (!row) return undefined;
    if (!row.retired_until) return toRecord(row);
    // A rotated-out secret: the key as it is now (its grants, limits, revocation), until the secret's end.
    const current = await this.get(row.key_id as string);
    return current && { ...current, secretExpiresAt: row.retired_until as Date };
  }

  async revoke(keyId: string): Promise<boolean> {
    const hash = await this.currentHash(keyId);
    if (!hash) return false;
    await this.client.execute("UPDATE api_keys_by_hash SET revoked = true WHERE secret_hash = ?", [hash]);
    return true;
  }

  async get(keyId: string): Promise<ApiKeyRecord | undefined> {
    const hash = await this.currentHash(keyId);
    const row = hash === undefined ? undefined : await this.row(hash);
    return row ? toRecord(row) : undefined;
  }

  async update(keyId: string, change: KeyChange): Promise<ApiKeyRecord | undefined> {
    const hash = await this.currentHash(keyId);
    if (!hash) return undefined;
    const sets: string[] = [];
    const params: unknown[] = [];
    if (change.name !== undefined) sets.push("name = ?") && params.push(change.name);
    if (change.models !== undefined) sets.push("models = ?") && params.push([...change.models]);
    if (change.limits !== undefined) sets.push("limits = ?") && params.push(encodeKeyLimits(change.limits) || null);
    if (sets.length > 0) await this.client.execute(`UPDATE api_keys_by_hash SET ${sets.join(", ")} WHERE secret_hash = ?`, [...params, hash]);
    return this.get(keyId);
  }

  async rotate(keyId: string, newSecretHash: string, previousExpiresAt: Date): Promise<ApiKeyRecord | undefined> {
    const oldHash = await this.currentHash(keyId);
    const old = oldHash === undefined ? undefined : await this.row(oldHash);
    if (!oldHash || !old) return undefined;
    const rotated: ApiKeyRecord = { ...toRecord(old), secretHash: newSecretHash, previousSecretExpiresAt: previousExpiresAt };
    await this.writeRecord(rotated, oldHash);
    // The old secret's end is set before the switch, so it never works past its end, even if the switch fails.
    await this.client.execute("UPDATE api_keys_by_hash SET retired_until = ? WHERE secret_hash = ?", [previousExpiresAt, oldHash]);
    const switched = await conditional(this.client, "UPDATE api_keys SET secret_hash = ? WHERE key_id = ? IF secret_hash = ?", [newSecretHash, keyId, oldHash]);
    if (!switched.applied) {
      // Another rotation won: this one's secret is never usable, and the winner's state stands.
      await this.client.execute("DELETE FROM api_keys_by_hash WHERE secret_hash = ?", [newSecretHash]);
      return undefined;
    }
    await this.client.execute("UPDATE api_keys_by_account SET secret_hash = ? WHERE account_id = ? AND key_id = ?", [newSecretHash, old.account_id, keyId]);
    const older = old.previous_secret_hash as string | null;
    if (older) await this.client.execute("UPDATE api_keys_by_hash SET retired_until = ? WHERE secret_hash = ?", [new Date(0), older]);
    return rotated;
  }

  async listByAccount(accountId: string): Promise<ApiKeyRecord[]> {
    const rows = (await this.client.execute("SELECT secret_hash FROM api_keys_by_account WHERE account_id = ?", [accountId])).rows;
    const records = await Promise.all(rows.map((row) => this.findBySecretHash(row.secret_hash as string)));
    return records
      .filter((record): record is ApiKeyRecord => record !== undefined)
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.keyId.localeCompare(b.keyId));
  }

  private async writeRecord(record: ApiKeyRecord, previousHash: string | null = null): Promise<void> {
    await this.client.execute(
      `INSERT INTO api_keys_by_hash (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        record.secretHash, record.keyId, record.accountId, [...record.models], record.revoked, record.createdAt,
        encodeKeyLimits(record.limits) || null, record.role ?? "key", record.name ?? "", null, previousHash, record.previousSecretExpiresAt ?? null,
      ],
    );
  }

  private async row(secretHash: string): Promise<Row | undefined> {
    return (await this.client.execute(`SELECT ${COLUMNS} FROM api_keys_by_hash WHERE secret_hash = ?`, [secretHash])).first() ?? undefined;
  }

  private async currentHash(keyId: string): Promise<string | undefined> {
    const row = (await this.client.execute("SELECT secret_hash FROM api_keys WHERE key_id = ?", [keyId])).first();
    return row ? (row.secret_hash as string) : undefined;
  }
}

function toRecord(row: Row): ApiKeyRecord {
  return {
    secretHash: row.secret_hash,
    keyId: row.key_id,
    accountId: row.account_id,
    models: row.models ?? [],
    revoked: row.revoked === true,
    createdAt: row.created_at,
    ...(row.limits ? { limits: decodeKeyLimits(row.limits as string) } : {}),
    ...(row.role === "owner" ? { role: "owner" as const } : {}),
    ...(row.name ? { name: row.name as string } : {}),
    ...(row.previous_secret_expires_at ? { previousSecretExpiresAt: row.previous_secret_expires_at as Date } : {}),
  };
}
