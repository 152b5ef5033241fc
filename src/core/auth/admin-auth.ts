import { timingSafeEqual } from "node:crypto";
import { DomainError } from "../../domain/errors/domain-error.js";
import { presentedSession, type SessionAuthDeps } from "./owner-auth.js";

/** Whether `authorization: Bearer` carries the admin token (compared in constant time). */
export function presentsAdminToken(headers: Headers, adminToken: string): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(headers.get("authorization") ?? "");
  const given = Buffer.from(match?.[1] ?? "");
  const expected = Buffer.from(adminToken);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The operator: the admin token, or an open operator's panel session (with its CSRF token) that the current admin token issued. */
export async function requireAdmin(headers: Headers, deps: SessionAuthDeps): Promise<void> {
  const session = await presentedSession(headers, deps);
  if (session) {
    if (session.role !== "operator") throw notOperator();
    return;
  }
  requireAdminToken(headers, deps.settingsOf.adminToken);
}

export const notOperator = () => new DomainError("permission_denied", "operator_session_required", "an owner's panel session cannot call the admin API");

/** 401 invalid_admin_token unless `authorization: Bearer` carries the admin token. */
export function requireAdminToken(headers: Headers, adminToken: string): void {
  if (!presentsAdminToken(headers, adminToken)) {
    throw new DomainError("unauthenticated", "invalid_admin_token", "a valid admin token is required");
  }
}
