import { timingSafeEqual } from "node:crypto";
import { DomainError } from "../../domain/errors/domain-error.js";
import { presentedSession } from "./owner-auth.js";

/** Whether `authorization: Bearer` carries the admin token (compared in constant time). */
export function presentsAdminToken(headers: Headers, adminToken: string): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(headers.get("authorization") ?? "");
  const given = Buffer.from(match?.[1] ?? "");
  const expected = Buffer.from(adminToken);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The operator: the admin token, or an operator's panel session (with its CSRF token). */
export function requireAdmin(headers: Headers, adminToken: string, sessionSecret: Buffer, now: Date): void {
  const session = presentedSession(headers, sessionSecret, now);
  if (session) {
    if (session.role !== "operator") throw new DomainError("permission_denied", "operator_session_required", "an owner's panel session cannot call the admin API");
    return;
  }
  if (!presentsAdminToken(headers, adminToken)) {
    throw new DomainError("unauthenticated", "invalid_admin_token", "a valid admin token is required");
  }
}
