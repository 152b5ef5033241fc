import type { Client } from "@connectrpc/connect";
import type { GenerationService } from "../../../gen/generation/v1/generation_service_pb.js";
import { SessionRole, type AccountService } from "../../../gen/generation/v1/account_service_pb.js";
import { checkCsrfToken, readSession } from "../../domain/accounts/panel-session.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import { createContextValues } from "@connectrpc/connect";
import { LRUCache } from "lru-cache";
import { rpc } from "../errors/rpc-errors.js";
import { notOperator, requireAdmin, requireAdminToken } from "./admin-auth.js";
import type { CallerAuthDeps } from "./api-key-auth.js";
import { hashSecret, presentedKey, usableNow } from "./presented-key.js";
import { authenticateOwner, CSRF_HEADER, ownerOfSession, presentedSession, SESSION_HEADER } from "./owner-auth.js";
import { CLIENT_ADDRESS, type CredentialGuard } from "./credential-guard.js";

/**
 * What a call needs before its body is worth reading: an API key, the
 * operator (admin token or operator session), or the account's owner (owner
 * token or owner session).
 */
export type Credential = "api_key" | "admin" | "owner";

/**
 * Checks a call's credentials from its headers alone, before the edge reads
 * its body: a caller without a valid key never makes the process read (or
 * hold) a byte of what it sends. Throws the same ConnectError the handler
 * would (401 in the surface's shape). The handler still authenticates the
 * call itself: this check only decides whether the body is read, so a key
 * revoked a moment ago may pass it (for at most `ttlMs`) and is refused there.
 * `client` is the caller's address as the edge's connection shows it (see
 * CredentialGuard): over its budget of failures, the call is refused 429
 * before its credential is looked at.
 */
export type HeaderCheck = (headers: Headers, needs: Credential, client: string | undefined) => Promise<void>;

/**
 * Remembers keys found valid for `ttlMs` (at most 10,000 of them, the least
 * recently used going first), so a busy client costs one key lookup per
 * interval, not one per call.
 */
function rememberValid(ttlMs: number) {
  const valid = new LRUCache<string, true>({ max: 10_000, ttl: ttlMs });
  return {
    has: (hash: string) => valid.has(hash),
    add: (hash: string) => void valid.set(hash, true),
  };
}

/** The check beside the core: the key and session stores themselves. */
export function localHeaderCheck(deps: CallerAuthDeps, guard: CredentialGuard, ttlMs = 5_000): HeaderCheck {
  const keys = deps.apiKeys;
  const remembered = rememberValid(ttlMs);
  return (headers, needs, client) => guard.check(client, headers, () =>
    rpc(async () => {
      if (needs === "admin") return requireAdmin(headers, deps);
      if (needs === "owner") return void (await authenticateOwner(headers, deps));
      const secret = presentedKey(headers);
      if (!secret) {
        // An owner's panel session calls as its owner (see authenticate).
        const session = await presentedSession(headers, deps);
        if (session) return void (await ownerOfSession(session, keys));
        throw new DomainError("unauthenticated", "missing_api_key", "an API key is required");
      }
      const hash = hashSecret(secret);
      if (remembered.has(hash)) return;
      const record = await keys.findBySecretHash(hash);
      if (!usableNow(record, deps.clock.now())) throw new DomainError("unauthenticated", "invalid_api_key", "the API key is invalid or revoked");
      // A secret in its rotation grace is not remembered: its end is checked on every call.
      if (!record?.secretExpiresAt) remembered.add(hash);
    }));
}

/**
 * A gateway in front of a remote core: the admin token and the session secret
 * are configuration; a key is asked of the core (GetBalance needs only a valid
 * key), an owner too (GetAccount needs only the owner), and whether an
 * operator's session is still open (StartSession answers a session as it is).
 * The core counts the failures of what it is asked (the client travels with
 * the call); what is checked here counts in this gateway's own `guard`.
 */
export function remoteHeaderCheck(
  generation: Client<typeof GenerationService>, account: Client<typeof AccountService>, adminToken: string, sessionSecret: Buffer,
  guard: CredentialGuard, ttlMs = 5_000,
): HeaderCheck {
  const remembered = rememberValid(ttlMs);
  return async (headers, needs, client) => {
    const options = { headers, contextValues: createContextValues().set(CLIENT_ADDRESS, client) };
    if (needs === "admin") {
      const token = headers.get(SESSION_HEADER);
      if (token === null || presentedKey(headers) !== undefined) {
        return guard.check(client, headers, () => rpc(async () => requireAdminToken(headers, adminToken)));
      }
      // Forgeries and missing CSRF tokens stop here; only the core knows whether the session was ended.
      await guard.check(client, headers, () => rpc(async () => {
        readSession(sessionSecret, token, new Date());
        checkCsrfToken(sessionSecret, token, headers.get(CSRF_HEADER));
      }));
      const session = await account.startSession({}, options);
      if (session.role !== SessionRole.OPERATOR) return rpc(async () => { throw notOperator(); });
      return;
    }
    if (needs === "owner") return void (await account.getAccount({}, options));
    const secret = presentedKey(headers);
    if (!secret) {
      // A panel session is checked by the core, which knows whether its owner token still stands.
      if (headers.has("x-panel-session")) return void (await generation.getBalance({}, options));
      return rpc(async () => { throw new DomainError("unauthenticated", "missing_api_key", "an API key is required"); });
    }
    const hash = hashSecret(secret);
    if (remembered.has(hash)) return;
    await generation.getBalance({}, options);
    remembered.add(hash);
  };
}
