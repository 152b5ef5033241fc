import { createHmac, timingSafeEqual } from "node:crypto";
import { badRequest } from "../errors/domain-error.js";

/**
 * Opaque, signed page tokens: base64url(JSON fields) "." base64url(MAC).
 * The MAC (HMAC-SHA256 truncated to 128 bits) covers the listing's kind, the
 * account and the filters as well as the fields, so a token is valid only
 * where it was issued: altered, forged, another account's or other filters'
 * tokens are 400 invalid_page_token, never another account's data.
 */

const MAC_BYTES = 16;
const TOKEN = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** What a token is bound to besides its own fields. */
export interface TokenScope {
  /** Which listing issued it ("job-list-page-token", …). */
  readonly purpose: string;
  readonly accountId: string;
  /** The listing's filters as one string. */
  readonly filters: string;
}

function mac(secret: Buffer, scope: TokenScope, payload: string): Buffer {
  return createHmac("sha256", secret)
    .update(`${scope.purpose}\n${scope.accountId}\n${scope.filters}\n${payload}`)
    .digest()
    .subarray(0, MAC_BYTES);
}

export function signPageToken(secret: Buffer, scope: TokenScope, fields: readonly unknown[]): string {
  const payload = Buffer.from(JSON.stringify(fields)).toString("base64url");
  return `${payload}.${mac(secret, scope, payload).toString("base64url")}`;
}

export const invalidPageToken = (why: string) =>
  badRequest("invalid_page_token", `page_token is not valid: ${why}; start again without it`, { field: "page_token" });

/** The fields of a token issued by signPageToken for this scope; anything else is invalid_page_token. */
export function readPageToken(secret: Buffer, scope: TokenScope, token: string): unknown[] {
  if (!TOKEN.test(token)) throw invalidPageToken("it is not a token of this service");
  const [payload, signature] = token.split(".") as [string, string];
  // Compared as text: base64url's last character carries unused bits, so decoding would let two spellings of one signature pass.
  const expected = Buffer.from(mac(secret, scope, payload).toString("base64url"));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw invalidPageToken("it was altered, or issued for another account or other filters");
  }
  // Signed by us, so well-formed unless the format changed: checked anyway, a bad one must never reach a store.
  let fields: unknown;
  try {
    fields = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
  } catch {
    throw invalidPageToken("it cannot be read");
  }
  if (!Array.isArray(fields)) throw invalidPageToken("it has an unknown format");
  return fields;
}
