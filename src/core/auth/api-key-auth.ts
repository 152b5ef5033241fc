import type { KeyLimits } from "../../domain/accounts/key-limits.js";
import { hash } from "node:crypto";
import { LRUCache } from "lru-cache";
import { DomainError } from "../../domain/errors/domain-error.js";
import { isModelGranted } from "../../domain/accounts/grants.js";
import type { ModelSpec } from "../../domain/catalog/models.js";
import type { ApiKeyStore } from "../../ports/api-key-store.js";
import { ALL_MODELS_GRANT } from "../../domain/accounts/grants.js";
import { MODELS } from "../../domain/catalog/models.js";
import { ownerOfSession, presentedSession, type Owner, type SessionAuthDeps } from "./owner-auth.js";

export interface Caller {
  readonly keyId: string;
  readonly accountId: string;
  readonly models: readonly string[];
  /** The key's limits, as stored when this request began (a change applies from the next request). */
  readonly limits: KeyLimits;
}

/**
 * The hashes of the keys presented lately: a call hashes its key twice (the
 * edge's check, then the handler's). Bounded in entries and in length (a key
 * is 40-some characters; a header's worth of garbage is hashed, not kept).
 */
const recentHashes = new LRUCache<string, string>({ max: 1_024 });
const MAX_REMEMBERED_KEY_LENGTH = 128;

/** A key's stored form: its SHA-256, hex. */
export function hashSecret(secret: string): string {
  const known = recentHashes.get(secret);
  if (known !== undefined) return known;
  const hashed = hash("sha256", secret, "hex");
  if (secret.length <= MAX_REMEMBERED_KEY_LENGTH) recentHashes.set(secret, hashed);
  return hashed;
}

/** The platform key from `authorization: Bearer` or `x-vendor-api-key` (spec section 5). */
export function presentedKey(headers: Headers): string | undefined {
  const vendor = headers.get("x-vendor-api-key")?.trim();
  if (vendor) return vendor;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(headers.get("authorization") ?? "");
  return match?.[1];
}

/** What authenticating a caller needs: the credentials, and what checking panel sessions needs. */
export interface CallerAuthDeps extends SessionAuthDeps {
  readonly apiKeys: ApiKeyStore;
}

/** Every model, the ones "*" leaves out included: what an account's owner may use. */
const OWNER_GRANTS: readonly string[] = [ALL_MODELS_GRANT, ...MODELS.filter((model) => model.needsExplicitGrant).map((model) => model.id)];

/**
 * The account's owner as a caller of the generation APIs: every model, no key
 * limits (the owner sets those on keys); its jobs and charges name the owner
 * token as their key, so the statement and usage tell them apart.
 */
function ownerCaller(owner: Owner): Caller {
  return { keyId: owner.credentialId, accountId: owner.accountId, models: OWNER_GRANTS, limits: {} };
}

/**
 * The caller of a generation or text call: an API key (`authorization:
 * Bearer` or `x-vendor-api-key`), an owner token likewise, or, with neither,
 * an owner's panel session (with its CSRF token).
 */
export async function authenticate(headers: Headers, deps: CallerAuthDeps): Promise<Caller> {
  const secret = presentedKey(headers);
  if (!secret) {
    const session = await presentedSession(headers, deps);
    if (session) return ownerCaller(await ownerOfSession(session, deps.apiKeys));
    throw new DomainError("unauthenticated", "missing_api_key", "an API key is required");
  }
  const record = await deps.apiKeys.findBySecretHash(hashSecret(secret));
  if (!record || record.revoked) throw new DomainError("unauthenticated", "invalid_api_key", "the API key is invalid or revoked");
  if (record.role === "owner") return ownerCaller({ accountId: record.accountId, credentialId: record.keyId });
  return { keyId: record.keyId, accountId: record.accountId, models: record.models, limits: record.limits ?? {} };
}

export function requireGrant(caller: Caller, model: ModelSpec): void {
  if (!isModelGranted(caller.models, model)) {
    throw new DomainError("permission_denied", "model_not_permitted", `this API key has no permission for ${model.id}`, {
      model: model.id,
    });
  }
}
