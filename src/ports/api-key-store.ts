import type { KeyLimits } from "../domain/accounts/key-limits.js";
import type { AuditRecord } from "./audit-log.js";

export interface ApiKeyRecord {
  readonly keyId: string;
  readonly accountId: string;
  /** SHA-256 of the secret; the secret itself is never stored. */
  readonly secretHash: string;
  readonly models: readonly string[];
  readonly revoked: boolean;
  readonly createdAt: Date;
  /** Its spend and rate limits; none when absent. */
  readonly limits?: KeyLimits;
  /**
   * What the credential is for: "key" (absent too), an API key for the
   * generation APIs; "owner", an owner token that manages the account (its
   * keys and webhook) and signs in to the panel, and calls no model.
   */
  readonly role?: CredentialRole;
  /** Display name; "" or absent when none was given. */
  readonly name?: string;
  /** Set when found by a secret a rotation replaced: when that secret stops working (the record is the key's current one). */
  readonly secretExpiresAt?: Date;
  /** After a rotation with a grace: when the previous secret stops working. */
  readonly previousSecretExpiresAt?: Date;
}

/** What an update of a key changes: each field given replaces the stored one. */
export interface KeyChange {
  readonly name?: string;
  readonly models?: readonly string[];
  readonly limits?: KeyLimits;
}

export type CredentialRole = "key" | "owner";

/**
 * Credentials. A change's `audit` record, when given, is written with it in one atomic step (a transaction, a logged
 * batch, or the conditional write's outbox on Cassandra): both or neither; none when the change is refused (undefined/false).
 */
export interface ApiKeyStore {
  create(record: ApiKeyRecord, audit?: AuditRecord): Promise<void>;
  /** The key of a current secret, or of a rotated-out one (with secretExpiresAt; the caller compares it with its clock). */
  findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined>;
  /** False when the key does not exist. */
  revoke(keyId: string, audit?: AuditRecord): Promise<boolean>;
  get(keyId: string): Promise<ApiKeyRecord | undefined>;
  /** Changes the key's name, grants or limits (read by the very next lookup); undefined when the key does not exist. */
  update(keyId: string, change: KeyChange, audit?: AuditRecord): Promise<ApiKeyRecord | undefined>;
  /**
   * Gives the key a new secret: the old one is then found (as the key's current record, with
   * secretExpiresAt) until `previousExpiresAt`; a secret older than that ends now. Undefined when the key does not exist.
   */
  rotate(keyId: string, newSecretHash: string, previousExpiresAt: Date, audit?: AuditRecord): Promise<ApiKeyRecord | undefined>;
  /** Every credential of the account (keys and owner tokens, revoked ones too), oldest first. */
  listByAccount(accountId: string): Promise<ApiKeyRecord[]>;
}
