import type { ApiKeyRecord, ApiKeyStore, KeyChange } from "../../ports/api-key-store.js";
import { decodeKeyLimits, encodeKeyLimits } from "../shared/key-limits-codec.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";
import type { AuditRecord } from "../../ports/audit-log.js";
import { SqliteAuditLog } from "./sqlite-audit-log.js";

interface KeyRow {
  key_id: string;
  secret_hash: string;
  account_id: string;
  models: string;
  revoked: number;
  created_at: number;
  limits: string | null;
  role: string;
  name: string;
  previous_secret_hash: string | null;
  previous_secret_expires_at: number | null;
}

const COLUMNS = "key_id, secret_hash, account_id, models, revoked, created_at, limits, role, name, previous_secret_hash, previous_secret_expires_at";

/** How many credentials the lookup cache keeps (the least recently added go first). */
const CACHED_CREDENTIALS = 10_000;

/**
 * API keys and owner tokens by secret hash (every request), by id (revocation) and by account (listing). Only the hash of a secret is stored.
 *
 * Lookups by hash are answered from memory once read: every request authenticates, and a key
 * changes rarely. Every write (a new key, a revocation, an update, a rotation) empties the cache in the same
 * step, so a revoked key is refused by the very next request. That is exact because only this
 * process opens the database (sqlite-database.ts holds an exclusive lock). Unknown hashes are not
 * cached: guessing keys fills nothing.
 */
export class SqliteApiKeyStore implements ApiKeyStore {
  private readonly statements;
  private readonly byHash = new Map<string, ApiKeyRecord>();
  /** A change and its audit record in one IMMEDIATE transaction; the record only when the change found its key (> 0 rows). */
  private readonly audited: (change: () => { changes: number }, audit: AuditRecord | undefined) => number;

  constructor(db: SqliteDb, audit = new SqliteAuditLog(db)) {
    const tx = db.transaction((change: () => { changes: number }, record: AuditRecord | undefined) => {
      const { changes } = change();
      if (changes > 0) audit.append(record);
      return changes;
    });
    this.audited = (change, record) => sqliteCall(() => tx.immediate(change, record));
    this.statements = {
      // A record written again (same id or same hash) replaces the old one, as the other stores do.
      upsert: db.prepare(
        `INSERT OR REPLACE INTO api_keys (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      byHash: db.prepare(`SELECT ${COLUMNS} FROM api_keys WHERE secret_hash = ?`),
      byPreviousHash: db.prepare(`SELECT ${COLUMNS} FROM api_keys WHERE previous_secret_hash = ?`),
      byId: db.prepare(`SELECT ${COLUMNS} FROM api_keys WHERE key_id = ?`),
      byAccount: db.prepare(`SELECT ${COLUMNS} FROM api_keys WHERE account_id = ? ORDER BY created_at, key_id`),
      revoke: db.prepare("UPDATE api_keys SET revoked = 1 WHERE key_id = ?"),
      update: db.prepare(
        "UPDATE api_keys SET name = coalesce(?, name), models = coalesce(?, models), limits = CASE WHEN ? THEN ? ELSE limits END WHERE key_id = ?",
      ),
      rotate: db.prepare(
        "UPDATE api_keys SET previous_secret_hash = secret_hash, previous_secret_expires_at = ?, secret_hash = ? WHERE key_id = ?",
      ),
    };
  }

  async create(record: ApiKeyRecord, audit?: AuditRecord): Promise<void> {
    this.byHash.clear();
    this.audited(() =>
      this.statements.upsert.run(
        record.keyId, record.secretHash, record.accountId, JSON.stringify(record.models), record.revoked ? 1 : 0,
        record.createdAt.getTime(), encodeKeyLimits(record.limits) || null, record.role ?? "key", record.name ?? "",
        null, null,
      ), audit);
  }

  async findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const cached = this.byHash.get(secretHash);
    if (cached) return cached;
    const record = toRecord(sqliteCall(() => this.statements.byHash.get(secretHash)) as KeyRow | undefined) ?? this.byPrevious(secretHash);
    if (record) {
      if (this.byHash.size >= CACHED_CREDENTIALS) this.byHash.delete(this.byHash.keys().next().value!);
      this.byHash.set(secretHash, record);
    }
    return record;
  }

  async get(keyId: string): Promise<ApiKeyRecord | undefined> {
    return toRecord(sqliteCall(() => this.statements.byId.get(keyId)) as KeyRow | undefined);
  }

  async update(keyId: string, change: KeyChange, audit?: AuditRecord): Promise<ApiKeyRecord | undefined> {
    this.byHash.clear();
    const models = change.models === undefined ? null : JSON.stringify(change.models);
    const limits = change.limits === undefined ? null : encodeKeyLimits(change.limits) || null;
    const run = () => this.statements.update.run(change.name ?? null, models, change.limits === undefined ? 0 : 1, limits, keyId);
    return this.audited(run, audit) > 0 ? this.get(keyId) : undefined;
  }

  async rotate(keyId: string, newSecretHash: string, previousExpiresAt: Date, audit?: AuditRecord): Promise<ApiKeyRecord | undefined> {
    this.byHash.clear();
    return this.audited(() => this.statements.rotate.run(previousExpiresAt.getTime(), newSecretHash, keyId), audit) > 0 ? this.get(keyId) : undefined;
  }

  /** The key a rotation took this secret from, marked with when the secret stops working. */
  private byPrevious(secretHash: string): ApiKeyRecord | undefined {
    const row = sqliteCall(() => this.statements.byPreviousHash.get(secretHash)) as KeyRow | undefined;
    const record = toRecord(row);
    return record && row?.previous_secret_expires_at != null ? Object.freeze({ ...record, secretExpiresAt: new Date(row.previous_secret_expires_at) }) : undefined;
  }

  async revoke(keyId: string, audit?: AuditRecord): Promise<boolean> {
    this.byHash.clear();
    return this.audited(() => this.statements.revoke.run(keyId), audit) > 0;
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
    ...(row.name !== "" ? { name: row.name } : {}),
    ...(row.previous_secret_expires_at !== null ? { previousSecretExpiresAt: new Date(row.previous_secret_expires_at) } : {}),
  });
}
