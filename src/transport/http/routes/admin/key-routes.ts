import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { FastifyInstance } from "fastify";
import type { ApiKey, KeyLimits as KeyLimitsMessage } from "../../../../../gen/generation/v1/admin_service_pb.js";
import type { CoreClients } from "../../../../core/index.js";
import type { BodyGuard } from "../../edge/body-guard.js";
import { GatewayError } from "../../gateway-error.js";
import { ADMIN_SCHEMAS as S } from "../../schemas/admin.js";
import { ADMIN_BODY, adminCall, type Body } from "./admin-call.js";

/** A key's limits from a body: strings stay strings (the domain reads them), numbers are sent as they are; null: unset. */
function limitsOf(body: unknown) {
  const value = (field: string) => (body as Body | undefined)?.[field] ?? undefined;
  return {
    spendLimit: value("spend_limit") as string | undefined,
    dailySpendLimit: value("daily_spend_limit") as string | undefined,
    monthlySpendLimit: value("monthly_spend_limit") as string | undefined,
    rateLimitPerMinute: int32OrRefuse("rate_limit_per_minute", value("rate_limit_per_minute") as number | undefined),
    maxConcurrentJobs: int32OrRefuse("max_concurrent_jobs", value("max_concurrent_jobs") as number | undefined),
  };
}

/** A number the proto's int32 cannot carry (a fraction, out of range) is the domain's 400, said here before the conversion would bend it. */
function int32OrRefuse(field: string, value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < 1 || value > 2 ** 31 - 1) {
    throw new GatewayError(400, "invalid_key_limit", `${field} must be a whole number of at least 1 (got ${value})`);
  }
  return value;
}

function limitsJson(limits: KeyLimitsMessage | undefined) {
  return {
    spend_limit: limits?.spendLimit ?? null,
    daily_spend_limit: limits?.dailySpendLimit ?? null,
    monthly_spend_limit: limits?.monthlySpendLimit ?? null,
    rate_limit_per_minute: limits?.rateLimitPerMinute ?? null,
    max_concurrent_jobs: limits?.maxConcurrentJobs ?? null,
  };
}

function apiKeyJson(key: ApiKey | undefined) {
  return {
    key_id: key?.keyId ?? "",
    account_id: key?.accountId ?? "",
    models: key?.models ?? [],
    revoked: key?.revoked ?? false,
    created_at: key?.createdAt ? timestampDate(key.createdAt).toISOString() : null,
    ...limitsJson(key?.limits),
    spent: key?.spent ?? "0.00",
    spent_today: key?.spentToday ?? "0.00",
    spent_this_month: key?.spentThisMonth ?? "0.00",
    held: key?.held ?? "0.00",
    remaining: key?.remaining ?? null,
    remaining_today: key?.remainingToday ?? null,
    remaining_this_month: key?.remainingThisMonth ?? null,
  };
}

/** API keys: issued to an account, read with their standing, their limits changed, revoked (owner tokens too). */
export function keyRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    const withBody = guard(ADMIN_BODY);
    app.post<{ Params: { accountId: string } }>("/admin/v1/accounts/:accountId/keys", { ...withBody, schema: S.createApiKey }, async (request, reply) => {
      const { models } = request.body as { models: string[] };
      const key = await core.admin.createApiKey({ accountId: request.params.accountId, models, limits: limitsOf(request.body) }, adminCall(request));
      return reply.code(201).send({ key_id: key.keyId, api_key: key.apiKey, account_id: key.accountId, models: key.models, ...limitsJson(key.limits) });
    });

    app.get<{ Params: { keyId: string } }>("/admin/v1/keys/:keyId", { onRequest: withBody.onRequest, schema: S.getApiKey }, async (request) => {
      const { key } = await core.admin.getApiKey({ keyId: request.params.keyId }, adminCall(request));
      return apiKeyJson(key);
    });

    app.patch<{ Params: { keyId: string } }>("/admin/v1/keys/:keyId", { ...withBody, schema: S.updateApiKey }, async (request) => {
      // The fields sent are the ones changed (null removes a limit): exactly an update mask.
      const paths = Object.keys((request.body ?? {}) as Body);
      const { key } = await core.admin.updateApiKey(
        { keyId: request.params.keyId, limits: limitsOf(request.body), updateMask: { paths } },
        adminCall(request),
      );
      return apiKeyJson(key);
    });

    // DELETE may carry a body too (Fastify reads it): the token is checked first, as on every route that takes one.
    app.delete<{ Params: { keyId: string } }>("/admin/v1/keys/:keyId", { ...withBody, schema: S.revokeApiKey }, async (request) => {
      const response = await core.admin.revokeApiKey({ keyId: request.params.keyId }, adminCall(request));
      return { key_id: response.keyId, revoked: response.revoked };
    });
  };
}
