import type { ApiKeyRecord, ApiKeyStore } from "../../ports/api-key-store.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";

interface KeyRow {
  key_id: string;
  secret_hash: string;
  account_id: string;
  models: string;
  revoked: number;
  created_at: number;
}

/** API keys by secret hash (every request) and by id (revocation). Only the hash of a secret is stored. */
export class SqliteApiKeyStore implements ApiKeyStore {
  private readonly statements;

  constructor(db: SqliteDb) {
    this.statements = {
      // A record written again (same id or same hash) replaces the old one, as the other stores do.
      upsert: db.prepare(
        "INSERT OR REPLACE INTO api_keys (key_id, secret_hash, account_id, models, revoked, created_at) VALUES (?, ?, ?, ?, ?, ?)",
      ),
      byHash: db.prepare("SELECT key_id, secret_hash, account_id, models, revoked, created_at FROM api_keys WHERE secret_hash = ?"),
      revoke: db.prepare("UPDATE api_keys SET revoked = 1 WHERE key_id = ?"),
    };
  }

  async create(record: ApiKeyRecord): Promise<void> {
    sqliteCall(() =>
      this.statements.upsert.run(
        record.keyId, record.secretHash, record.accountId, JSON.stringify(record.models), record.revoked ? 1 : 0,
        record.createdAt.getTime(),
      ),
    );
  }

  async findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const row = sqliteCall(() => this.statements.byHash.get(secretHash)) as KeyRow | undefined;
    if (!row) return undefined;
    return {
      keyId: row.key_id,
      accountId: row.account_id,
      secretHash: row.secret_hash,
      models: JSON.parse(row.models) as string[],
      revoked: row.revoked === 1,
      createdAt: new Date(row.created_at),
    };
  }

  async revoke(keyId: string): Promise<boolean> {
    return sqliteCall(() => this.statements.revoke.run(keyId)).changes > 0;
  }
}
