import { randomBytes, randomUUID } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { FieldMask } from "@bufbuild/protobuf/wkt";
import type { KeyLimits as KeyLimitsMessage } from "../../../gen/generation/v1/admin_service_pb.js";
import { ALL_MODELS_GRANT } from "../../domain/accounts/grants.js";
import { changeKeyLimits, keyStanding, parseKeyLimits, type KeyLimits, type KeyLimitsInput } from "../../domain/accounts/key-limits.js";
import { findModel } from "../../domain/catalog/models.js";
import { DomainError, invalid } from "../../domain/errors/domain-error.js";
import { formatMoney } from "../../domain/money.js";
import { checkTextLength, MAX_NAME_CHARACTERS } from "../../domain/validation/text-fields.js";
import type { ApiKeyRecord, ApiKeyStore, CredentialRole, KeyChange } from "../../ports/api-key-store.js";
import type { Clock } from "../../ports/clock.js";
import type { Ledger } from "../../ports/ledger.js";
import type { PanelSessionStore } from "../../ports/panel-session-store.js";
import { hashSecret } from "../auth/presented-key.js";
import type { Audit } from "../audit/audit-trail.js";

/**
 * API keys and owner tokens as both the operator (AdminService) and an
 * account's owner (AccountService) manage them: one home for issuing a
 * credential, reading a key's standing and changing its limits.
 */
export interface KeyDeps {
  readonly apiKeys: ApiKeyStore;
  readonly ledger: Pick<Ledger, "keyAccount">;
  readonly clock: Clock;
}

export const keyNotFound = (keyId: string) => new DomainError("not_found", "key_not_found", `no key ${keyId}`);

/** A key the operator manages; an owner token only with `owners` (those are revoked, not managed). */
export async function existingKey(apiKeys: ApiKeyStore, keyId: string, { owners = false } = {}): Promise<ApiKeyRecord> {
  const record = keyId === "" ? undefined : await apiKeys.get(keyId);
  if (!record || (!owners && record.role === "owner")) throw keyNotFound(keyId);
  return record;
}

/** A key of the account; another account's key, an owner token or an unknown id are all key_not_found. */
export async function keyOfAccount(apiKeys: ApiKeyStore, accountId: string, keyId: string): Promise<ApiKeyRecord> {
  const record = keyId === "" ? undefined : await apiKeys.get(keyId);
  if (!record || record.accountId !== accountId || record.role === "owner") throw keyNotFound(keyId);
  return record;
}

/** What the audit trail shows of a credential: never its secret nor its hash. */
const auditedKey = (record: Pick<ApiKeyRecord, "name" | "models" | "limits">) => ({
  name: record.name ?? "", models: [...record.models], limits: limitsMessage(record.limits ?? {}),
});

/** Revokes a key or an owner token (the operator's); a revoked owner token's panel sessions end with it. */
export async function revokeCredential(
  deps: KeyDeps & { readonly panelSessions: Pick<PanelSessionStore, "revokeByCredential"> }, keyId: string, audit?: Audit,
) {
  const record = await existingKey(deps.apiKeys, keyId, { owners: true });
  await revokeKey(deps, record, audit);
  // A revoked owner token's sessions are refused anyway (ownerOfSession); their records end too, so no listing shows them open.
  if (record.role === "owner") await deps.panelSessions.revokeByCredential(record.keyId, deps.clock.now());
}

/**
 * The one revocation of a credential found (the operator's and the owner's): recorded in the audit trail, except when
 * it was revoked already (nothing changes).
 */
export async function revokeKey(deps: KeyDeps, record: ApiKeyRecord, audit?: Audit): Promise<void> {
  const kind = record.role === "owner" ? "owner_token.revoked" : "key.revoked";
  const change = { accountId: record.accountId, subject: record.keyId, before: { revoked: record.revoked }, after: { revoked: true } };
  if (!(await deps.apiKeys.revoke(record.keyId, record.revoked ? undefined : audit?.(kind, change)))) throw keyNotFound(record.keyId);
}

/** Grants name at least one model, each "*" or a model of the catalog (422 invalid_grants). */
export function checkGrants(models: readonly string[]): void {
  if (models.length === 0) throw invalid("invalid_grants", "models must name at least one model or \"*\"", { field: "models" });
  for (const model of models) {
    if (model !== ALL_MODELS_GRANT && findModel(model)?.id !== model) {
      throw invalid("invalid_grants", `unknown model "${model}" in models`, { field: "models" });
    }
  }
}

/** The longest grace a rotation gives the old secret: one day, enough to roll a deployment, short enough to bound a leak. */
export const MAX_ROTATION_GRACE_SECONDS = 86_400;

const newSecret = (role: CredentialRole) => `${role === "owner" ? "gso" : "gsk"}_${randomBytes(32).toString("base64url")}`;

/** A new credential of the account; its secret is returned here once and only its hash is stored. */
export async function issueCredential(
  deps: KeyDeps, accountId: string, role: CredentialRole, models: readonly string[], limits: KeyLimits, name = "", audit?: Audit,
): Promise<{ record: ApiKeyRecord; secret: string }> {
  checkTextLength("name", name, MAX_NAME_CHARACTERS);
  const keyId = `${role === "owner" ? "own" : "key"}_${randomUUID().replaceAll("-", "")}`;
  const secret = newSecret(role);
  const record: ApiKeyRecord = {
    keyId, accountId, secretHash: hashSecret(secret), models: [...models], revoked: false, createdAt: deps.clock.now(), limits, name,
    ...(role === "owner" ? { role } : {}),
  };
  const kind = role === "owner" ? "owner_token.created" : "key.created";
  await deps.apiKeys.create(record, audit?.(kind, { accountId, subject: keyId, after: { ...auditedKey(record), secret: "issued" } }));
  return { record, secret };
}

/** The key with its standing: spent by period, held, and what each spend limit leaves. */
export async function keyView(deps: KeyDeps, record: ApiKeyRecord) {
  const limits = record.limits ?? {};
  const { spending, held } = await deps.ledger.keyAccount(record.accountId, record.keyId);
  const standing = keyStanding(limits, spending, held, deps.clock.now());
  const text = (amount: bigint | undefined) => (amount === undefined ? undefined : formatMoney(amount));
  const previousEnds = record.previousSecretExpiresAt;
  return {
    keyId: record.keyId, accountId: record.accountId, models: [...record.models], revoked: record.revoked, name: record.name ?? "",
    rotationGraceExpireTime: previousEnds && previousEnds > deps.clock.now() ? timestampFromDate(previousEnds) : undefined,
    createdAt: timestampFromDate(record.createdAt), limits: limitsMessage(limits),
    spent: formatMoney(standing.spent), spentToday: formatMoney(standing.spentToday), spentThisMonth: formatMoney(standing.spentThisMonth),
    held: formatMoney(standing.held), remaining: text(standing.remaining), remainingToday: text(standing.remainingToday),
    remainingThisMonth: text(standing.remainingThisMonth),
  };
}

/** The account's API keys (not its owner tokens), oldest first, each with its standing. */
export async function accountKeys(deps: KeyDeps, accountId: string) {
  const records = (await deps.apiKeys.listByAccount(accountId)).filter((record) => (record.role ?? "key") === "key");
  return Promise.all(records.map((record) => keyView(deps, record)));
}

/** What an update asks (AdminService.UpdateApiKey, AccountService.UpdateAccountApiKey): the fields update_mask names. */
export interface KeyUpdate {
  readonly limits?: KeyLimitsMessage;
  readonly updateMask?: FieldMask;
  readonly name: string;
  readonly models: readonly string[];
}

/**
 * The one change of a key's name, grants and limits together (the operator's and the owner's): every field is checked
 * before anything is written, and the store's next lookup (every process's, on Cassandra) sees the change.
 */
export async function updateKey(deps: KeyDeps, record: ApiKeyRecord, update: KeyUpdate, audit?: Audit): Promise<ApiKeyRecord> {
  const mentioned = new Set<keyof KeyLimits>();
  const change: { name?: string; models?: readonly string[]; limits?: KeyLimits } = {};
  for (const path of update.updateMask?.paths ?? []) {
    if (path === "name") {
      checkTextLength("name", update.name, MAX_NAME_CHARACTERS);
      change.name = update.name;
      continue;
    }
    if (path === "models") {
      checkGrants(update.models);
      change.models = [...update.models];
      continue;
    }
    const field = LIMIT_FIELDS[path];
    if (!field) throw invalid("unknown_field", `"${path}" is not a field of a key (name, models, ${Object.keys(LIMIT_FIELDS).join(", ")})`, { field: path });
    mentioned.add(field);
  }
  if (mentioned.size > 0) change.limits = changeKeyLimits(record.limits ?? {}, limitsInput(update.limits), mentioned);
  const was = auditedKey(record);
  const now = auditedKey({ name: change.name ?? record.name, models: change.models ?? record.models, limits: change.limits ?? record.limits });
  const fields = (["name", "models", "limits"] as const).filter((field) => change[field] !== undefined);
  const pick = (view: typeof was) => Object.fromEntries(fields.map((field) => [field, view[field]]));
  const entry = fields.length === 0 ? undefined : audit?.("key.updated", { accountId: record.accountId, subject: record.keyId, before: pick(was), after: pick(now) });
  const changed = await deps.apiKeys.update(record.keyId, change satisfies KeyChange, entry);
  if (!changed) throw keyNotFound(record.keyId);
  return changed;
}

/**
 * The one rotation of a key's secret: a new secret for the same key (grants, limits and spending stay with the key id);
 * the old one ends at once, or after `graceSeconds` (0 to MAX_ROTATION_GRACE_SECONDS). The new secret is returned once.
 */
export async function rotateKey(
  deps: KeyDeps, record: ApiKeyRecord, graceSeconds: number, audit?: Audit,
): Promise<{ record: ApiKeyRecord; secret: string }> {
  if (!Number.isInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > MAX_ROTATION_GRACE_SECONDS) {
    throw invalid("invalid_grace_seconds", `grace_seconds must be a whole number from 0 to ${MAX_ROTATION_GRACE_SECONDS}`, { field: "grace_seconds" });
  }
  if (record.revoked) throw keyNotFound(record.keyId);
  const secret = newSecret(record.role ?? "key");
  const ends = new Date(deps.clock.now().getTime() + graceSeconds * 1000);
  const change = { accountId: record.accountId, subject: record.keyId, after: { secret: "changed", grace_seconds: graceSeconds, previous_secret_ends: ends.toISOString() } };
  const rotated = await deps.apiKeys.rotate(record.keyId, hashSecret(secret), ends, audit?.("key.rotated", change));
  if (!rotated) throw new DomainError("conflict", "key_rotation_conflict", `key ${record.keyId} was rotated by another call at the same time; read it and retry`);
  return { record: rotated, secret };
}

/** update_mask paths (KeyLimits fields) → the domain's names. */
const LIMIT_FIELDS: Record<string, keyof KeyLimits> = {
  spend_limit: "spendLimit",
  daily_spend_limit: "dailySpendLimit",
  monthly_spend_limit: "monthlySpendLimit",
  rate_limit_per_minute: "ratePerMinute",
  max_concurrent_jobs: "maxConcurrentJobs",
};

export function parseLimitsMessage(message: KeyLimitsMessage | undefined): KeyLimits {
  return parseKeyLimits(limitsInput(message));
}

function limitsInput(message: KeyLimitsMessage | undefined): KeyLimitsInput {
  return {
    spendLimit: message?.spendLimit, dailySpendLimit: message?.dailySpendLimit, monthlySpendLimit: message?.monthlySpendLimit,
    ratePerMinute: message?.rateLimitPerMinute, maxConcurrentJobs: message?.maxConcurrentJobs,
  };
}

export function limitsMessage(limits: KeyLimits) {
  const text = (amount: bigint | undefined) => (amount === undefined ? undefined : formatMoney(amount));
  return {
    spendLimit: text(limits.spendLimit), dailySpendLimit: text(limits.dailySpendLimit), monthlySpendLimit: text(limits.monthlySpendLimit),
    rateLimitPerMinute: limits.ratePerMinute, maxConcurrentJobs: limits.maxConcurrentJobs,
  };
}
