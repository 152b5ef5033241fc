import { randomUUID } from "node:crypto";
import type { HandlerContext } from "@connectrpc/connect";
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { ListAuditEventsRequest } from "../../../gen/generation/v1/admin_service_pb.js";
import { encodeAuditToken, parseAuditQuery } from "../../domain/audit/audit-query.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import type { AuditLog, AuditRecord } from "../../ports/audit-log.js";
import type { Clock } from "../../ports/clock.js";
import { CLIENT_ADDRESS } from "../auth/credential-guard.js";

/**
 * The audit trail (issue 39): one record per change, made here and handed to the store call that makes the change,
 * which writes both in one atomic step. A change kind is wired with one argument: the `Audit` of its call, e.g.
 * `deps.settings.setModelPaused(id, paused, audit?.("model.paused", { subject: id, before, after }))`.
 */
export const AUDIT_KINDS = [
  "project.paused", "model.paused", "route.paused", "webhook.set", "webhook.secret_rotated",
  "credit.added", "balance.adjusted",
  "key.created", "key.updated", "key.rotated", "key.revoked",
  "owner_token.created", "owner_token.revoked",
  "price.updated", "tool_price.set", "tool_price.deleted",
  "session.started", "session.ended",
] as const;
export type AuditKind = (typeof AUDIT_KINDS)[number] | (string & {});

/** What one change did: values as plain JSON (never a secret: say "changed" instead). */
export interface AuditChange {
  readonly accountId?: string;
  readonly subject?: string;
  readonly before?: unknown;
  readonly after?: unknown;
}

/** The record of one change by this call's caller. */
export type Audit = (kind: AuditKind, change: AuditChange) => AuditRecord;

/** The Audit of a call: its actor ("admin", "owner:<account_id>", "key:<key_id>") and the client address the edge saw. */
export function auditOf(clock: Clock, context: HandlerContext, actor: string): Audit {
  const clientAddress = context.values.get(CLIENT_ADDRESS) ?? "";
  const json = (value: unknown) => (value === undefined ? undefined : JSON.stringify(value));
  return (kind, change) => ({
    eventId: randomUUID(), at: clock.now(), kind, actor, clientAddress,
    accountId: change.accountId, subject: change.subject, before: json(change.before), after: json(change.after),
  });
}

const dateOf = (timestamp: Timestamp | undefined) => (timestamp ? timestampDate(timestamp) : undefined);

/**
 * One page of the trail. `ownAccount`: an owner's listing, always of that account (another account named is refused,
 * never quietly answered with the owner's own).
 */
export async function auditPage(
  deps: { readonly audit: AuditLog; readonly clock: Clock }, secret: Buffer, request: ListAuditEventsRequest, ownAccount?: string,
) {
  if (ownAccount !== undefined && request.accountId !== "" && request.accountId !== ownAccount) {
    throw new DomainError("permission_denied", "not_your_account", "an owner lists the audit events of its own account only");
  }
  const input = {
    limit: request.limit, pageToken: request.pageToken || undefined, from: dateOf(request.from), to: dateOf(request.to),
    accountId: ownAccount ?? request.accountId, actor: request.actor, kind: request.kind,
  };
  const query = parseAuditQuery(secret, input, deps.clock.now());
  const page = await deps.audit.list(query);
  return {
    events: page.records.map((record) => ({
      eventId: record.eventId, createdAt: timestampFromDate(record.at), kind: record.kind, actor: record.actor,
      clientAddress: record.clientAddress, accountId: record.accountId ?? "", subject: record.subject ?? "",
      before: record.before ?? "", after: record.after ?? "",
    })),
    nextPageToken: page.next ? encodeAuditToken(secret, input, query, page.next) : "",
  };
}
