import { createHmac, timingSafeEqual } from "node:crypto";

/** Signature over the blob key and its expiry: neither can be altered alone. */
export function signFile(secret: Buffer, key: string, expiresUnix: number): string {
  return createHmac("sha256", secret).update(`${key}\n${expiresUnix}`).digest("hex");
}

export type FileAccess = "granted" | "expired" | "bad_signature";

const SIGNATURE = /^[0-9a-f]{64}$/;

export function checkFileAccess(secret: Buffer, key: string, expiresUnix: number, signature: string, nowUnix: number): FileAccess {
  // Buffer.from(hex) stops at the first non-hex character, so the form is checked first: "<sig>zz" is an altered link.
  if (!SIGNATURE.test(signature)) return "bad_signature";
  const expected = Buffer.from(signFile(secret, key, expiresUnix), "hex");
  const given = Buffer.from(signature, "hex");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return "bad_signature";
  return expiresUnix < nowUnix ? "expired" : "granted";
}
