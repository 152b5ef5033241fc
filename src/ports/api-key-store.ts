import type { KeyLimits } from "../domain/accounts/key-limits.js";

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
}

export type CredentialRole = "key" | "owner";

export interface ApiKeyStore {
  create(record: ApiKeyRecord): Promise<void>;
  findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined>;
  /** False when the key does not exist. */
  revoke(keyId: string): Promise<boolean>;
  get(keyId: string): Promise<ApiKeyRecord | undefined>;
  /** Replaces the key's limits; false when the key does not exist. */
  setLimits(keyId: string, limits: KeyLimits): Promise<boolean>;
  /** Every credential of the account (keys and owner tokens, revoked ones too), oldest first. */
  listByAccount(accountId: string): Promise<ApiKeyRecord[]>;
}
