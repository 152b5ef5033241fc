import type { ApiKeyRecord, ApiKeyStore, KeyChange } from "../../ports/api-key-store.js";
import { decodeKeyLimits, encodeKeyLimits } from "../shared/key-limits-codec.js";
import { conditional, type CassandraClient, type Row } from "./cassandra-session.js";
import type { AuditRecord } from "../../ports/audit-log.js";
import { auditWrites } from "./cassandra-audit-log.js";
import { AuditOutbox } from "./audit-outbox.js";

type Params = Parameters<CassandraClient["loggedBatch"]>[0][number]["params"];
type Write = { query: string; params: unknown[] };
/** Plain writes with their audit rows: one logged batch, all or none. */
const batchOf = (writes: Write[], audit: AuditRecord | undefined) =>
  [...writes, ...auditWrites(audit)].map((write) => ({ query: write.query, params: write.params as Params }));

const COLUMNS = "secret_hash, key_id, account_id, models, revoked, created_at, limits, role, name, retired_until, previous_secret_hash, previous_secret_expires_at";

/**
 * API keys on Cassandra: the record in api_keys_by_hash (the lookup of every request, never cached: a change is
 * seen by every process's next request), pointed at by api_keys (by id) and api_keys_by_account (the listing).
 */
export class CassandraApiKeyStore implements ApiKeyStore {
  private readonly outbox: AuditOutbox;

  constructor(private readonly client: CassandraClient) {
    this.outbox = new AuditOutbox(client);
  }

  /** The record, its pointers and its audit event: one logged batch (plain writes). */
  async create(record: ApiKeyRecord, audit?: AuditRecord): Promise<void> {
    await this.client.loggedBatch(batchOf([
      recordWrite(record),
      { query: "INSERT INTO api_keys (key_id, secret_hash) VALUES (?, ?)", params: [record.keyId, record.secretHash] },
      { query: "INSERT INTO api_keys_by_account (account_id, key_id, secret_hash) VALUES (?, ?, ?)", params: [record.accountId, record.keyId, record.secretHash] },
    ], audit));
  }

  async findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const row = await this.row(secretHash);
    if (!row) return undefined;
    if (!row.retired_until) return toRecord(row);
    // A rotated-out secret: the key as it is now (its grants, limits, revocation), until the secret's end.
    const current = await this.get(row.key_id as string);
    return current && { ...current, secretExpiresAt: row.retired_until as Date };
  }

  async revoke(keyId: string, audit?: AuditRecord): Promise<boolean> {
    const hash = await this.currentHash(keyId);
    if (!hash) return false;
    await this.client.loggedBatch(batchOf([{ query: "UPDATE api_keys_by_hash SET revoked = true WHERE secret_hash = ?", params: [hash] }], audit));
    return true;
  }

  async get(keyId: string): Promise<ApiKeyRecord | undefined> {
    const hash = await this.currentHash(keyId);
    const row = hash === undefined ? undefined : await this.row(hash);
    return row ? toRecord(row) : undefined;
  }

  async update(keyId: string, change: KeyChange, audit?: AuditRecord): Promise<ApiKeyRecord | undefined> {
    const hash = await this.currentHash(keyId);
    if (!hash) return undefined;
    const sets: string[] = [];
    const params: unknown[] = [];
    if (change.name !== undefined) sets.push("name = ?") && params.push(change.name);
    if (change.models !== undefined) sets.push("models = ?") && params.push([...change.models]);
    if (change.limits !== undefined) sets.push("limits = ?") && params.push(encodeKeyLimits(change.limits) || null);
    const writes = sets.length === 0 ? [] : [{ query: `UPDATE api_keys_by_hash SET ${sets.join(", ")} WHERE secret_hash = ?`, params: [...params, hash] }];
    if (writes.length > 0 || audit) await this.client.loggedBatch(batchOf(writes, audit));
    return this.get(keyId);
  }

  /** The switch is a conditional write: its event rides in the api_keys row's outbox (AuditOutbox). */
  async rotate(keyId: string, newSecretHash: string, previousExpiresAt: Date, audit?: AuditRecord): Promise<ApiKeyRecord | undefined> {
    let rotated: ApiKeyRecord | undefined;
    await this.outbox.conditional(audit, { table: "api_keys", column: "key_id", key: keyId }, async (entry) => {
      rotated = await this.switchSecret(keyId, newSecretHash, previousExpiresAt, entry);
      return rotated !== undefined;
    });
    return rotated;
  }

  private async switchSecret(
    keyId: string, newSecretHash: string, previousExpiresAt: Date, entry: { set: string; param: Record<string, string> } | undefined,
  ): Promise<ApiKeyRecord | undefined> {
    const oldHash = await this.currentHash(keyId);
    const old = oldHash === undefined ? undefined : await this.row(oldHash);
    if (!oldHash || !old) return undefined;
    const rotated: ApiKeyRecord = { ...toRecord(old), secretHash: newSecretHash, previousSecretExpiresAt: previousExpiresAt };
    await this.writeRecord(rotated, oldHash);
    // The old secret's end is set before the switch, so it never works past its end, even if the switch fails.
    await this.client.execute("UPDATE api_keys_by_hash SET retired_until = ? WHERE secret_hash = ?", [previousExpiresAt, oldHash]);
    const switched = entry
      ? await conditional(this.client, `UPDATE api_keys SET secret_hash = ?, ${entry.set} WHERE key_id = ? IF secret_hash = ?`, [newSecretHash, entry.param, keyId, oldHash], { prepare: true })
      : await conditional(this.client, "UPDATE api_keys SET secret_hash = ? WHERE key_id = ? IF secret_hash = ?", [newSecretHash, keyId, oldHash]);
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
    const write = recordWrite(record, previousHash);
    await this.client.execute(write.query, write.params);
  }

  private async row(secretHash: string): Promise<Row | undefined> {
    return (await this.client.execute(`SELECT ${COLUMNS} FROM api_keys_by_hash WHERE secret_hash = ?`, [secretHash])).first() ?? undefined;
  }

  private async currentHash(keyId: string): Promise<string | undefined> {
    const row = (await this.client.execute("SELECT secret_hash FROM api_keys WHERE key_id = ?", [keyId])).first();
    return row ? (row.secret_hash as string) : undefined;
  }
}

function recordWrite(record: ApiKeyRecord, previousHash: string | null = null): Write {
  return {
    query: `INSERT INTO api_keys_by_hash (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    params: [
      record.secretHash, record.keyId, record.accountId, [...record.models], record.revoked, record.createdAt,
      encodeKeyLimits(record.limits) || null, record.role ?? "key", record.name ?? "", null, previousHash, record.previousSecretExpiresAt ?? null,
    ],
  };
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
