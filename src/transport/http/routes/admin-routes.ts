import { ScalarType, toJson, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from "fastify";
import { AdminService, KeyLimitsSchema, ToolPriceSchema, UpstreamRouteSchema } from "../../../../gen/generation/v1/admin_service_pb.js";
import { ModelPriceSchema } from "../../../../gen/generation/v1/model_pb.js";
import type { CoreClients } from "../../../core/index.js";
import { callerValues, idempotencyKeyOf, platformHeaders } from "../call-options.js";
import type { BodyGuard } from "../edge/body-guard.js";
import { GatewayError } from "../gateway-error.js";
import { balanceJson, ledgerPageJson, parseBody, usageJson } from "../json-mapping.js";
import { LEDGER_ENTRY } from "../schemas/money.js";
import { ACCOUNT_DETAILS, ACCOUNT_SUMMARY, ADMIN_SCHEMAS, API_KEY, AUDIT_EVENT, KEY_LIMITS, PANEL_SESSION } from "../schemas/admin.js";
import { limitOf, queryText, timestampOf } from "../query-params.js";
import { csvStatementRequest, statementRequest, USAGE_GROUP_COLUMNS, usageGroupOf, usageRequest } from "./money-routes.js";
import { csvFilename, sendStatementCsv, sendUsageCsv, wantsCsv } from "../csv-export.js";

type Rpc = keyof typeof AdminService.method;
type Method = (typeof AdminService.method)[Rpc];
type AdminRequest = FastifyRequest<{ Params: Record<string, string>; Querystring: Record<string, string | undefined> }>;

/** One route of the fixed admin contract: which RPC it calls, with what, and how its answer reads. */
interface AdminRoute<R extends Rpc> {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  readonly url: string;
  readonly rpc: R;
  /** "body": the admin token is checked before a body is read; "header": before the query is; absent: by the core. */
  readonly guard?: "body" | "header";
  readonly status?: number;
  /** The RPC's request; by default the path's parameters, named as its fields. */
  readonly request?: (request: AdminRequest) => MessageInitShape<(typeof AdminService.method)[R]["input"]>;
  /** The answer, where it is not the response in proto field names. */
  readonly answer?: (response: MessageShape<(typeof AdminService.method)[R]["output"]>) => unknown;
  /** The answer as CSV (Accept: text/csv), from as many calls of the RPC as it needs. */
  readonly csv?: (
    request: AdminRequest, reply: FastifyReply,
    invoke: (message: MessageInitShape<(typeof AdminService.method)[R]["input"]>) => Promise<MessageShape<(typeof AdminService.method)[R]["output"]>>,
  ) => Promise<FastifyReply>;
}

const route = <R extends Rpc>(definition: AdminRoute<R>) => definition as unknown as AdminRoute<Rpc>;

const PROTO_NAMES = { useProtoFieldName: true, alwaysEmitImplicit: true } as const;

/** The call options of an admin route: its admin token (or panel session, via the core) and the caller's values. */
function adminCall(request: FastifyRequest) {
  return { headers: platformHeaders(request), contextValues: callerValues(request) };
}

/** A body's fields, as its route schema let them through (types checked there; null means "not set"). */
type Body = Record<string, unknown> | undefined;

function stringField(body: unknown, field: string, required = true): string {
  const value = (body as Body)?.[field] as string | null | undefined;
  if (value === undefined || value === null) {
    if (required) throw new GatewayError(422, "validation_failed", `${field} is required`);
    return "";
  }
  return value;
}

const paused = (body: unknown) => (body as Record<string, boolean>).paused!;

/** A key's limits from a body: strings stay strings (the domain reads them), numbers are sent as they are; null: unset. */
function limitsOf(body: unknown): MessageInitShape<typeof KeyLimitsSchema> {
  const limits: Record<string, unknown> = {};
  for (const field of KeyLimitsSchema.fields) {
    const value = (body as Body)?.[field.name] ?? undefined;
    limits[field.localName] = field.scalar === ScalarType.INT32 ? int32OrRefuse(field.name, value as number | undefined) : value;
  }
  return limits;
}

/** A number the proto's int32 cannot carry (a fraction, out of range) is the domain's 400, said here before the conversion would bend it. */
function int32OrRefuse(field: string, value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < 1 || value > 2 ** 31 - 1) {
    throw new GatewayError(400, "invalid_key_limit", `${field} must be a whole number of at least 1 (got ${value})`);
  }
  return value;
}

const ROUTES = [
  route({
    method: "GET", url: "/accounts", rpc: "listAccounts", guard: "header",
    request: (request) => {
      const query = queryText(request);
      return { q: query.q ?? "", limit: limitOf(query.limit), pageToken: query.page_token ?? "" };
    },
    answer: ({ accounts, nextPageToken }) => ({ accounts: accounts.map(ACCOUNT_SUMMARY.json), next_page_token: nextPageToken === "" ? null : nextPageToken }),
  }),
  route({
    method: "POST", url: "/accounts", rpc: "createAccount", guard: "body", status: 201,
    request: ({ body }) => ({ name: stringField(body, "name", false), balance: stringField(body, "balance", false) }),
    answer: (response) => ({ account_id: response.accountId, name: response.name, ...balanceJson(response.balance) }),
  }),
  route({
    method: "POST", url: "/accounts/:accountId/credits", rpc: "addCredits", guard: "body",
    request: (request) => ({
      ...request.params, amount: stringField(request.body, "amount"), reason: stringField(request.body, "reason", false), idempotencyKey: idempotencyKeyOf(request),
    }),
    answer: ({ balance }) => balanceJson(balance),
  }),
  route({
    method: "POST", url: "/accounts/:accountId/adjustments", rpc: "adjustBalance", guard: "body", status: 201,
    request: (request) => ({
      ...request.params, amount: stringField(request.body, "amount"), reason: stringField(request.body, "reason"), idempotencyKey: idempotencyKeyOf(request),
    }),
    answer: ({ balance, entry }) => ({ ...balanceJson(balance), entry: LEDGER_ENTRY.json(entry!) }),
  }),
  route({
    method: "GET", url: "/accounts/:accountId", rpc: "getAccount", guard: "header",
    answer: ({ account }) => ACCOUNT_DETAILS.json(account),
  }),
  route({
    method: "PATCH", url: "/accounts/:accountId", rpc: "updateAccount", guard: "body",
    // The fields sent are the ones changed (a null threshold removes it): an update mask.
    request: ({ params, body }) => ({
      ...params, name: stringField(body, "name", false), lowBalanceThreshold: stringField(body, "low_balance_threshold", false),
      updateMask: { paths: Object.keys(body ?? {}) },
    }),
    answer: ({ account }) => ACCOUNT_DETAILS.json(account),
  }),
  route({
    method: "GET", url: "/accounts/:accountId/balance", rpc: "getAccountBalance",
    answer: ({ balance }) => balanceJson(balance),
  }),
  route({
    method: "GET", url: "/accounts/:accountId/ledger", rpc: "listAccountLedgerEntries", guard: "header",
    request: (request) => ({ ...request.params, query: statementRequest(request) }),
    answer: ledgerPageJson,
    csv: (request, reply, invoke) => {
      const query = csvStatementRequest(request);
      return sendStatementCsv(reply, csvFilename("ledger", request.params.accountId), query.pageToken ?? "", (pageToken) =>
        invoke({ ...request.params, query: { ...query, pageToken } }));
    },
  }),
  route({
    method: "GET", url: "/accounts/:accountId/usage", rpc: "getAccountUsage", guard: "header",
    request: (request) => ({ ...request.params, query: usageRequest(request) }),
    answer: ({ usage }) => usageJson(usage),
    csv: async (request, reply, invoke) => {
      const { usage } = await invoke({ ...request.params, query: usageRequest(request) });
      return sendUsageCsv(reply, csvFilename("usage", request.params.accountId), USAGE_GROUP_COLUMNS[usageGroupOf(request)], usage);
    },
  }),
  route({
    method: "PUT", url: "/accounts/:accountId/webhook", rpc: "setWebhook", guard: "body",
    request: ({ params, body }) => ({ ...params, url: stringField(body, "url", false) }),
  }),
  route({
    method: "POST", url: "/accounts/:accountId/keys", rpc: "createApiKey", guard: "body", status: 201,
    request: ({ params, body }) => ({
      ...params, models: (body as { models: string[] }).models, limits: limitsOf(body), name: stringField(body, "name", false),
    }),
    answer: (key) => ({
      key_id: key.keyId, api_key: key.apiKey, account_id: key.accountId, models: key.models, name: key.name, ...KEY_LIMITS.json(key.limits),
    }),
  }),
  route({ method: "GET", url: "/keys/:keyId", rpc: "getApiKey", guard: "header", answer: ({ key }) => API_KEY.json(key) }),
  route({
    method: "PATCH", url: "/keys/:keyId", rpc: "updateApiKey", guard: "body",
    // The fields sent are the ones changed (null removes a limit): exactly an update mask.
    request: ({ params, body }) => ({
      ...params, limits: limitsOf(body), name: stringField(body, "name", false), models: (body as { models?: string[] } | undefined)?.models ?? [],
      updateMask: { paths: Object.keys(body ?? {}) },
    }),
    answer: ({ key }) => API_KEY.json(key),
  }),
  route({
    method: "POST", url: "/keys/:keyId/rotate", rpc: "rotateApiKey", guard: "body",
    request: ({ params, body }) => ({ ...params, graceSeconds: ((body as Body)?.grace_seconds as number | undefined) ?? 0 }),
    answer: ({ key, apiKey }) => ({ ...API_KEY.json(key), api_key: apiKey }),
  }),
  // DELETE may carry a body too (Fastify reads it): the token is checked first, as on every route that takes one.
  route({ method: "DELETE", url: "/keys/:keyId", rpc: "revokeApiKey", guard: "body" }),
  route({
    method: "GET", url: "/panel-sessions", rpc: "listPanelSessions", guard: "header",
    request: ({ query }) => {
      // Digits only, so no text becomes a number the proto's int32 would bend; the range is the core's (400 invalid_limit).
      if (query.limit !== undefined && !/^[0-9]{1,4}$/.test(query.limit)) {
        throw new GatewayError(400, "invalid_limit", "limit must be an integer from 1 to 1000");
      }
      return { limit: query.limit === undefined ? undefined : Number(query.limit) };
    },
    answer: ({ sessions }) => ({ sessions: sessions.map(PANEL_SESSION.json) }),
  }),
  route({ method: "DELETE", url: "/panel-sessions/:sessionId", rpc: "revokePanelSession", guard: "body" }),
  route({
    method: "GET", url: "/audit", rpc: "listAuditEvents", guard: "header",
    request: ({ query }) => ({
      limit: limitOf(query.limit), pageToken: query.page_token ?? "", from: timestampOf("from", query.from), to: timestampOf("to", query.to),
      accountId: query.account_id ?? "", actor: query.actor ?? "", kind: query.kind ?? "",
    }),
    answer: ({ events, nextPageToken }) => ({ events: events.map(AUDIT_EVENT.json), next_page_token: nextPageToken === "" ? null : nextPageToken }),
  }),
  route({ method: "PUT", url: "/pause", rpc: "setProjectPaused", guard: "body", request: ({ body }) => ({ paused: paused(body) }) }),
  route({
    method: "PUT", url: "/models/:model/pause", rpc: "setModelPaused", guard: "body",
    request: ({ params, body }) => ({ ...params, paused: paused(body) }),
  }),
  route({
    method: "GET", url: "/routes", rpc: "listRoutes",
    // Counters are int64 in the proto (strings in proto JSON); the REST view gives plain numbers.
    answer: ({ routes }) => ({
      routes: routes.map((upstream) => ({
        ...(toJson(UpstreamRouteSchema, upstream, PROTO_NAMES) as object),
        requests: Number(upstream.requests),
        failures: Number(upstream.failures),
      })),
    }),
  }),
  route({
    method: "PUT", url: "/routes/:name/pause", rpc: "setRoutePaused", guard: "body",
    request: ({ params, body }) => ({ ...params, paused: paused(body) }),
  }),
  route({ method: "GET", url: "/prices", rpc: "listPrices" }),
  route({
    method: "PUT", url: "/prices/:model", rpc: "updatePrice", guard: "body",
    request: ({ params, body }) => {
      const price = parseBody(ModelPriceSchema, body);
      price.model = params.model;
      return { price };
    },
    answer: ({ price }) => toJson(ModelPriceSchema, price!, PROTO_NAMES),
  }),
  // Two segments under /prices, so a tool's path never reads as a model id (PUT /prices/{model}).
  route({
    method: "PUT", url: "/prices/tools/:tool", rpc: "setToolPrice", guard: "body",
    request: ({ params, body }) => ({ price: { tool: params.tool, perCall: stringField(body, "per_call") } }),
    answer: ({ price }) => toJson(ToolPriceSchema, price!, PROTO_NAMES),
  }),
  route({ method: "DELETE", url: "/prices/tools/:tool", rpc: "deleteToolPrice", guard: "body" }),
];

/**
 * The fixed admin contract under /admin/v1 (tools outside the project depend on it). Query routes type their
 * query as text, so its one refusal (a repeated parameter) is answered here, as 400.
 */
export function adminRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    const withBody = guard({ credential: "admin", keyFrom: "platform", images: false });
    const guards = { body: withBody, header: { onRequest: withBody.onRequest } };
    for (const { method, url, rpc, guard: checked, status, request: requestOf, answer, csv } of ROUTES) {
      // The path's parameters are text, each required.
      const names = [...url.matchAll(/:(\w+)/g)].map((match) => match[1]!);
      const params = { type: "object", properties: Object.fromEntries(names.map((name) => [name, { type: "string" }])), required: names };
      const schema: FastifySchema = { ...ADMIN_SCHEMAS[rpc as keyof typeof ADMIN_SCHEMAS], ...(names.length > 0 ? { params } : {}) };
      app.route<{ Params: Record<string, string>; Querystring: Record<string, string | undefined> }>({
        method,
        url: `/admin/v1${url}`,
        ...(checked ? guards[checked] : {}),
        schema,
        attachValidation: Boolean(schema.querystring),
        handler: async (request, reply) => {
          if (schema.querystring) queryText(request);
          const call = core.admin[rpc] as (request: object, options: ReturnType<typeof adminCall>) => Promise<MessageShape<Method["output"]>>;
          if (csv && wantsCsv(request)) return csv(request, reply, (message) => call(message, adminCall(request)));
          const response = await call(requestOf ? requestOf(request) : request.params, adminCall(request));
          // A money request's replay under its Idempotency-Key (decision 0039): the original answer, marked as the jobs' is.
          if ((response as { replayed?: boolean }).replayed === true) reply.header("idempotent-replayed", "true");
          const json = answer ? answer(response) : toJson(AdminService.method[rpc].output, response, PROTO_NAMES);
          return status ? reply.code(status).send(json) : json;
        },
      });
    }
  };
}
