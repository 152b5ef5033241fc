import { randomBytes, randomUUID } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { FieldMask } from "@bufbuild/protobuf/wkt";
import type { KeyLimits as KeyLimitsMessage } from "../../../gen/generation/v1/admin_service_pb.js";
import { ALL_MODELS_GRANT } from "../../domain/accounts/grants.js";
import { changeKeyLimits, keyStanding, parseKeyLimits, type KeyLimits, type KeyLimitsInput } from "../../domain/accounts/key-limits.js";
import { findModel } from "../../domain/catalog/models.js";
import { badRequest, DomainError, invalid } from "../../domain/errors/domain-error.js";
import { formatMoney } from "../../domain/money.js";
import type { ApiKeyRecord, ApiKeyStore, CredentialRole } from "../../ports/api-key-store.js";
import type { Clock } from "../../ports/clock.js";
import type { Ledger } from "../../ports/ledger.js";
import type { PanelSessionStore } from "../../ports/panel-session-store.js";
import { hashSecret } from "../auth/presented-key.js";

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

/** Revokes a key or an owner token (the operator's); a revoked owner token's panel sessions end with it. */
export async function revokeCredential(deps: KeyDeps & { readonly panelSessions: Pick<PanelSessionStore, "revokeByCredential"> }, keyId: string) {
  const record = await existingKey(deps.apiKeys, keyId, { owners: true });
  if (!(await deps.apiKeys.revoke(keyId))) throw keyNotFound(keyId);
  // A revoked owner token's sessions are refused anyway (ownerOfSession); their records end too, so no listing shows them open.
  if (record.role === "owner") await deps.panelSessions.revokeByCredential(record.keyId, deps.clock.now());
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

/** A new credential of the account; its secret is returned here once and only its hash is stored. */
export async function issueCredential(
  deps: KeyDeps, accountId: string, role: CredentialRole, models: readonly string[], limits: KeyLimits,
): Promise<{ record: ApiKeyRecord; secret: string }> {
  const [idPrefix, secretPrefix] = role === "owner" ? ["own", "gso"] : ["key", "gsk"];
  const keyId = `${idPrefix}_${randomUUID().replaceAll("-", "")}`;
  const secret = `${secretPrefix}_${randomBytes(32).toString("base64url")}`;
  const record: ApiKeyRecord = {
    keyId, accountId, secretHash: hashSecret(secret), models: [...models], revoked: false, createdAt: deps.clock.now(), limits,
    ...(role === "owner" ? { role } : {}),
  };
  await deps.apiKeys.create(record);
  return { record, secret };
}

/** The key with its standing: spent by period, held, and what each spend limit leaves. */
export async function keyView(deps: KeyDeps, record: ApiKeyRecord) {
  const limits = record.limits ?? {};
  const { spending, held } = await deps.ledger.keyAccount(record.accountId, record.keyId);
  const standing = keyStanding(limits, spending, held, deps.clock.now());
  const text = (amount: bigint | undefined) => (amount === undefined ? undefined : formatMoney(amount));
  return {
    keyId: record.keyId, accountId: record.accountId, models: [...record.models], revoked: record.revoked,
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

/** Applies an update_mask of key limits; returns the record as changed. */
export async function updateKeyLimits(
  deps: KeyDeps, record: ApiKeyRecord, limits: KeyLimitsMessage | undefined, mask: FieldMask | undefined,
): Promise<ApiKeyRecord> {
  const mentioned = new Set<keyof KeyLimits>();
  for (const path of mask?.paths ?? []) {
    const field = LIMIT_FIELDS[path];
    if (!field) throw badRequest("invalid_key_limit", `update_mask names "${path}", which is not a key limit (${Object.keys(LIMIT_FIELDS).join(", ")})`, { field: "update_mask" });
    mentioned.add(field);
  }
  const changed = changeKeyLimits(record.limits ?? {}, limitsInput(limits), mentioned);
  if (!(await deps.apiKeys.setLimits(record.keyId, changed))) throw keyNotFound(record.keyId);
  return { ...record, limits: changed };
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
