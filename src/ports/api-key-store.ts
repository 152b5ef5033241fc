export interface ApiKeyRecord {
  readonly keyId: string;
  readonly accountId: string;
  /** SHA-256 of the secret; the secret itself is never stored. */
  readonly secretHash: string;
  readonly models: readonly string[];
  readonly revoked: boolean;
  readonly createdAt: Date;
}

export interface ApiKeyStore {
  create(record: ApiKeyRecord): Promise<void>;
  findBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined>;
  /** False when the key does not exist. */
  revoke(keyId: string): Promise<boolean>;
}
