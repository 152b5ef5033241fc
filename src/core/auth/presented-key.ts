import { hash } from "node:crypto";
import { LRUCache } from "lru-cache";

// A credential as the headers present it, and its stored form: what API keys (api-key-auth.ts), owner
// tokens and panel sessions (owner-auth.ts) and the edge's header check all read, in a module of its own
// so that none of them imports another for it.

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

/** Whether a stored credential may call now: not revoked, and not a secret a rotation replaced whose grace has ended. */
export function usableNow(record: { readonly revoked: boolean; readonly secretExpiresAt?: Date } | undefined, now: Date): boolean {
  return record !== undefined && !record.revoked && (record.secretExpiresAt === undefined || record.secretExpiresAt > now);
}
