import type { KeyLimits } from "../../domain/accounts/key-limits.js";
import type { ApiKeyRecord, ApiKeyStore } from "../../ports/api-key-store.js";
import { decodeKeyLimits, encodeKeyLimits } from "../shared/key-limits-codec.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";

interface KeyRow {
  key_id: string;
  secret_hash: string;
  account_id: string;
  models: string;
  revoked: number;
  created_at: number;
  limits: string | null;
  role: string;
}

/** How many credentials the lookup cache keeps (the least recently added go first). */
const CACHED_CREDENTIALS = 10_000;

/**
 * API keys and owner tokens by secret hash (every request), by id (revocation) and by account (listing). Only the hash of a secret is stored.
 *
 * Lookups by hash are answered from memory once read: every request authenticates, and a key
 * changes rarely. Every write (a new key, a revocation, new limits) empties the cache in the same
 * step, so a revoked key is refused by the very next request. That is exact because only this
 * process opens the database (sqlite-database.ts holds an exclusive lock). Unknown hashes are not
 * cached: guessing keys fills nothing.
 */
export class SqliteApiKeyStore implements ApiKeyStore {
  private readonly statements;
  private readonly byHash = new Map<string, ApiKeyRecord>();

  constructor(db: SqliteDb) {
    this.statements = {
      // A record written again (same id or same hash) replaces the old one, as the other stores do.
      upsert: db.prepare(
        "INSERT OR REPLACE INTO api_keys (key_id, secret_hash, account_id, models, revoked, created_at, limits, role) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      ),
      byHash: db.prepare("SELECT key_id, secret_hash, account_id, models, revoked, created_at, limits, role FROM api_keys WHERE secret_hash = ?"),
      byId: db.prepare("SELECT key_id, secret_hash, account_id, models, revoked, created_at, limits, role FROM api_keys WHERE key_id = ?"),
      byAccount: db.prepare(
        "SELECT key_id, secret_hash, account_id, models, revoked, created_at, limits, role FROM api_keys WHERE account_id = ? ORDER BY created_at, key_id",
      ),
      revoke: db.prepare("UPDATE api_keys SET revoked = 1 WHERE key_id = ?"),
      setLimits: db.prepare("UPDATE api_keys SET limits = ? WHERE key_id = ?"),
    };
  }

  async create(record: ApiKeyRecord): Promise<void> {
    this.byHash.clear();
    sqliteCall(() =>
      this.statements.upsert.run(
        record.keyId, record.secretHash, record.accountId, JSON.stringify(record.models), record.revoked ? 1 : 0,
        record.createdAt.getTime(), encodeKeyLimits(record.limits) || null, record.role ?? "key",
      ),
    );
  }

  async findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const cached = this.byHash.get(secretHash);
    if (cached) return cached;
    const record = toRecord(sqliteCall(() => this.statements.byHash.get(secretHash)) as KeyRow | undefined);
    if (record) {
      if (this.byHash.size >= CACHED_CREDENTIALS) this.byHash.delete(this.byHash.keys().next().value!);
      this.byHash.set(secretHash, record);
    }
    return record;
  }

  async get(keyId: string): Promise<ApiKeyRecord | undefined> {
    return toRecord(sqliteCall(() => this.statements.byId.get(keyId)) as KeyRow | undefined);
  }

  async setLimits(keyId: string, limits: KeyLimits): Promise<boolean> {
    this.byHash.clear();
    return sqliteCall(() => this.statements.setLimits.run(encodeKeyLimits(limits) || null, keyId)).changes > 0;
  }

  async revoke(keyId: string): Promise<boolean> {
    this.byHash.clear();
    return sqliteCall(() => this.statements.revoke.run(keyId)).changes > 0;
  }

  async listByAccount(accountId: string): Promise<ApiKeyRecord[]> {
    return (sqliteCall(() => this.statements.byAccount.all(accountId)) as KeyRow[]).map((row) => toRecord(row)!);
  }
}

function toRecord(row: KeyRow | undefined): ApiKeyRecord | undefined {
  if (!row) return undefined;
  return Object.freeze({
    keyId: row.key_id,
    accountId: row.account_id,
    secretHash: row.secret_hash,
    models: JSON.parse(row.models) as string[],
    revoked: row.revoked === 1,
    createdAt: new Date(row.created_at),
    ...(row.limits ? { limits: decodeKeyLimits(row.limits) } : {}),
    ...(row.role === "owner" ? { role: "owner" as const } : {}),
  });
}
