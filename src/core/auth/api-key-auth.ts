import type { KeyLimits } from "../../domain/accounts/key-limits.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import { isModelGranted } from "../../domain/accounts/grants.js";
import type { ModelSpec } from "../../domain/catalog/models.js";
import type { ApiKeyStore } from "../../ports/api-key-store.js";
import { ALL_MODELS_GRANT } from "../../domain/accounts/grants.js";
import { MODELS } from "../../domain/catalog/models.js";
import { ownerOfSession, presentedSession, type Owner, type SessionAuthDeps } from "./owner-auth.js";
import { hashSecret, presentedKey, usableNow } from "./presented-key.js";

export interface Caller {
  readonly keyId: string;
  readonly accountId: string;
  readonly models: readonly string[];
  /** The key's limits, as stored when this request began (a change applies from the next request). */
  readonly limits: KeyLimits;
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
  if (!record || !usableNow(record, deps.clock.now())) throw new DomainError("unauthenticated", "invalid_api_key", "the API key is invalid or revoked");
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
