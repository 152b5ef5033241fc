import type { KeyLimits } from "../../domain/accounts/key-limits.js";
import { createHash } from "node:crypto";
import { DomainError } from "../../domain/errors/domain-error.js";
import { isModelGranted } from "../../domain/accounts/grants.js";
import type { ModelSpec } from "../../domain/catalog/models.js";
import type { ApiKeyRecord, ApiKeyStore } from "../../ports/api-key-store.js";

export interface Caller {
  readonly keyId: string;
  readonly accountId: string;
  readonly models: readonly string[];
  /** The key's limits, as stored when this request began (a change applies from the next request). */
  readonly limits: KeyLimits;
}

export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

/** The platform key from `authorization: Bearer` or `x-vendor-api-key` (spec section 5). */
export function presentedKey(headers: Headers): string | undefined {
  const vendor = headers.get("x-vendor-api-key")?.trim();
  if (vendor) return vendor;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(headers.get("authorization") ?? "");
  return match?.[1];
}

export async function authenticate(headers: Headers, keys: ApiKeyStore): Promise<Caller> {
  const secret = presentedKey(headers);
  if (!secret) throw new DomainError("unauthenticated", "missing_api_key", "an API key is required");
  const record = await keys.findBySecretHash(hashSecret(secret));
  if (!record || record.revoked) throw new DomainError("unauthenticated", "invalid_api_key", "the API key is invalid or revoked");
  refuseOwnerToken(record);
  return { keyId: record.keyId, accountId: record.accountId, models: record.models, limits: record.limits ?? {} };
}

/** An owner token manages its account and calls no model: presented as an API key, it is 401 invalid_api_key. */
export function refuseOwnerToken(record: ApiKeyRecord): void {
  if (record.role === "owner") {
    throw new DomainError("unauthenticated", "invalid_api_key", "an owner token manages the account and calls no model; use an API key");
  }
}

export function requireGrant(caller: Caller, model: ModelSpec): void {
  if (!isModelGranted(caller.models, model)) {
    throw new DomainError("permission_denied", "model_not_permitted", `this API key has no permission for ${model.id}`, {
      model: model.id,
    });
  }
}
