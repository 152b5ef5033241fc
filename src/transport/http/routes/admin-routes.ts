import { toJson } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ModelPriceSchema } from "../../../../gen/generation/v1/model_pb.js";
import {
  PanelSessionRole, UpstreamRouteSchema, type ApiKey, type KeyLimits as KeyLimitsMessage, type PanelSession,
} from "../../../../gen/generation/v1/admin_service_pb.js";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { CoreClients } from "../../../core/index.js";
import { balanceJson, ledgerEntryJson, parseBody, usageJson } from "../json-mapping.js";
import { ADMIN_LEDGER_SCHEMA, ADMIN_USAGE_SCHEMA } from "../schemas/money.js";
import { statementRequest, usageRequest, type StatementQueryText, type UsageQueryText } from "./money-routes.js";
import { GatewayError } from "../gateway-error.js";
import { callerValues } from "../call-options.js";
import type { BodyGuard } from "../edge/body-guard.js";
import { ADMIN_SCHEMAS as S } from "../schemas/admin.js";

const adminCall = (request: FastifyRequest) => {
  const headers = new Headers();
  if (request.headers.authorization) headers.set("authorization", request.headers.authorization);
  return { headers, contextValues: callerValues(request) };
};

/** A body's fields, as its route schema let them through (types checked there; null means "not set"). */
interface Body { [key: string]: unknown }

function stringField(body: unknown, field: string, required = true): string {
  const value = (body as Body | undefined)?.[field] as string | null | undefined;
  if (value === undefined || value === null) {
    if (required) throw new GatewayError(422, "validation_failed", `${field} is required`);
    return "";
  }
  return value;
}

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

function panelSessionJson(session: PanelSession) {
  return {
    session_id: session.sessionId,
    role: session.role === PanelSessionRole.OPERATOR ? "operator" : "owner",
    account_id: session.accountId === "" ? null : session.accountId,
    credential_id: session.credentialId === "" ? null : session.credentialId,
    create_time: session.createTime ? timestampDate(session.createTime).toISOString() : null,
    expire_time: session.expireTime ? timestampDate(session.expireTime).toISOString() : null,
  };
}

const booleanField = (body: unknown, field: string) => (body as Body)[field] as boolean;

const priceJson = (price: Parameters<typeof toJson<typeof ModelPriceSchema>>[1]) =>
  toJson(ModelPriceSchema, price, { useProtoFieldName: true, alwaysEmitImplicit: true });

/** The fixed admin contract under /admin/v1 (tools outside the project depend on it). */
export function adminRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    // Every route that may receive a body (POST, PUT, DELETE): the admin token is checked before the body is read.
    const withBody = guard({ credential: "admin", keyFrom: "platform", images: false });
    app.post("/admin/v1/accounts", { ...withBody, schema: S.createAccount }, async (request, reply) => {
      const response = await core.admin.createAccount(
        { name: stringField(request.body, "name", false), balance: stringField(request.body, "balance", false) },
        adminCall(request),
      );
      return reply.code(201).send({ account_id: response.accountId, name: response.name, ...balanceJson(response.balance) });
    });

    app.post<{ Params: { accountId: string } }>("/admin/v1/accounts/:accountId/credits", { ...withBody, schema: S.addCredits }, async (request) => {
      const { balance } = await core.admin.addCredits(
        { accountId: request.params.accountId, amount: stringField(request.body, "amount") },
        adminCall(request),
      );
      return balanceJson(balance);
    });

    app.get<{ Params: { accountId: string } }>("/admin/v1/accounts/:accountId/balance", { schema: S.getAccountBalance }, async (request) => {
      const { balance } = await core.admin.getAccountBalance({ accountId: request.params.accountId }, adminCall(request));
      return balanceJson(balance);
    });

    const adminQuery = guard({ credential: "admin", keyFrom: "platform", images: false }).onRequest;
    app.get<{ Params: { accountId: string }; Querystring: StatementQueryText }>(
      "/admin/v1/accounts/:accountId/ledger",
      { onRequest: adminQuery, schema: ADMIN_LEDGER_SCHEMA, attachValidation: true },
      async (request) => {
        const response = await core.admin.listAccountLedgerEntries({ accountId: request.params.accountId, query: statementRequest(request) }, adminCall(request));
        return { entries: response.entries.map(ledgerEntryJson), next_page_token: response.nextPageToken === "" ? null : response.nextPageToken };
      },
    );

    app.get<{ Params: { accountId: string }; Querystring: UsageQueryText }>(
      "/admin/v1/accounts/:accountId/usage",
      { onRequest: adminQuery, schema: ADMIN_USAGE_SCHEMA, attachValidation: true },
      async (request) => {
        const response = await core.admin.getAccountUsage({ accountId: request.params.accountId, query: usageRequest(request) }, adminCall(request));
        return usageJson(response.usage);
      },
    );

    app.post<{ Params: { accountId: string } }>("/admin/v1/accounts/:accountId/keys", { ...withBody, schema: S.createApiKey }, async (request, reply) => {
      const { models } = request.body as { models: string[] };
      const key = await core.admin.createApiKey({ accountId: request.params.accountId, models, limits: limitsOf(request.body) }, adminCall(request));
      return reply.code(201).send({ key_id: key.keyId, api_key: key.apiKey, account_id: key.accountId, models: key.models, ...limitsJson(key.limits) });
    });

    app.get<{ Params: { keyId: string } }>("/admin/v1/keys/:keyId", { onRequest: adminQuery, schema: S.getApiKey }, async (request) => {
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

    // DELETE may carry a body too (Fastify reads it): the token is checked first, as on every route above.
    app.delete<{ Params: { keyId: string } }>("/admin/v1/keys/:keyId", { ...withBody, schema: S.revokeApiKey }, async (request) => {
      const response = await core.admin.revokeApiKey({ keyId: request.params.keyId }, adminCall(request));
      return { key_id: response.keyId, revoked: response.revoked };
    });

    // attachValidation: the query is typed as text, so its one refusal (a repeated parameter) is ours to answer, as 400.
    app.get<{ Querystring: { limit?: string } }>(
      "/admin/v1/panel-sessions",
      { onRequest: adminQuery, schema: S.listPanelSessions, attachValidation: true },
      async (request) => {
        if (request.validationError) throw new GatewayError(400, "invalid_query", request.validationError.message);
        const text = request.query.limit;
        // Digits only, so no text becomes a number the proto's int32 would bend; the range is the core's (400 invalid_limit).
        if (text !== undefined && !/^[0-9]{1,4}$/.test(text)) throw new GatewayError(400, "invalid_limit", "limit must be an integer from 1 to 1000");
        const { sessions } = await core.admin.listPanelSessions({ limit: text === undefined ? undefined : Number(text) }, adminCall(request));
        return { sessions: sessions.map(panelSessionJson) };
      },
    );

    app.delete<{ Params: { sessionId: string } }>("/admin/v1/panel-sessions/:sessionId", { ...withBody, schema: S.revokePanelSession }, async (request) => {
      const response = await core.admin.revokePanelSession({ sessionId: request.params.sessionId }, adminCall(request));
      return { session_id: response.sessionId, revoked: response.revoked };
    });

    app.put<{ Params: { accountId: string } }>("/admin/v1/accounts/:accountId/webhook", { ...withBody, schema: S.setWebhook }, async (request) => {
      const response = await core.admin.setWebhook(
        { accountId: request.params.accountId, url: stringField(request.body, "url", false) },
        adminCall(request),
      );
      return { url: response.url, secret: response.secret };
    });

    app.put("/admin/v1/pause", { ...withBody, schema: S.setProjectPaused }, async (request) => {
      const response = await core.admin.setProjectPaused({ paused: booleanField(request.body, "paused") }, adminCall(request));
      return { paused: response.paused };
    });

    app.put<{ Params: { model: string } }>("/admin/v1/models/:model/pause", { ...withBody, schema: S.setModelPaused }, async (request) => {
      const response = await core.admin.setModelPaused(
        { model: request.params.model, paused: booleanField(request.body, "paused") },
        adminCall(request),
      );
      return { model: response.model, paused: response.paused };
    });

    app.get("/admin/v1/routes", { schema: S.listRoutes }, async (request) => {
      const { routes } = await core.admin.listRoutes({}, adminCall(request));
      // Counters are int64 in the proto (strings in proto JSON); the REST view gives plain numbers.
      return {
        routes: routes.map((route) => ({
          ...(toJson(UpstreamRouteSchema, route, { useProtoFieldName: true, alwaysEmitImplicit: true }) as object),
          requests: Number(route.requests),
          failures: Number(route.failures),
        })),
      };
    });

    app.put<{ Params: { name: string } }>("/admin/v1/routes/:name/pause", { ...withBody, schema: S.setRoutePaused }, async (request) => {
      const response = await core.admin.setRoutePaused(
        { name: request.params.name, paused: booleanField(request.body, "paused") },
        adminCall(request),
      );
      return { name: response.name, paused: response.paused };
    });

    app.get("/admin/v1/prices", { schema: S.listPrices }, async (request) => {
      const { prices } = await core.admin.listPrices({}, adminCall(request));
      return { prices: prices.map(priceJson) };
    });

    app.put<{ Params: { model: string } }>("/admin/v1/prices/:model", { ...withBody, schema: S.updatePrice }, async (request) => {
      const price = parseBody(ModelPriceSchema, request.body);
      price.model = request.params.model;
      const response = await core.admin.updatePrice({ price }, adminCall(request));
      return priceJson(response.price!);
    });
  };
}
