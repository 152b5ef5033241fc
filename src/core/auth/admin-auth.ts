import { timingSafeEqual } from "node:crypto";
import { DomainError } from "../../domain/errors/domain-error.js";

export function requireAdmin(headers: Headers, adminToken: string): void {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(headers.get("authorization") ?? "");
  const given = Buffer.from(match?.[1] ?? "");
  const expected = Buffer.from(adminToken);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new DomainError("unauthenticated", "invalid_admin_token", "a valid admin token is required");
  }
}
