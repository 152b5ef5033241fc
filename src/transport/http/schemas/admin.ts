import {
  AccountSummarySchema, AdminService, ApiKeySchema, AuditEventSchema, CreateApiKeyRequestSchema, KeyLimitsSchema, PanelSessionSchema, RotateApiKeyRequestSchema,
  SetWebhookResponseSchema, ToolPriceSchema, UpdateApiKeyRequestSchema, UpstreamRouteSchema,
} from "../../../../gen/generation/v1/admin_service_pb.js";
import { ModelPriceSchema } from "../../../../gen/generation/v1/model_pb.js";
import { ADMIN_SECURITY, BALANCE, DECIMAL, MONEY, MONEY_INPUT, operation } from "./common.js";
import { ADMIN_LEDGER_SCHEMA, ADMIN_USAGE_SCHEMA, LEDGER_ENTRY } from "./money.js";
import { describedFields, orNull, protoJsonSchema } from "./proto-json-schema.js";
import { restView, type RestView } from "./rest-view.js";
import type { Balance } from "../../../../gen/generation/v1/money_pb.js";
import type { AccountDetails } from "../../../../gen/generation/v1/admin_service_pb.js";
import { balanceJson } from "../json-mapping.js";

/**
 * Schemas of the operator's API under /admin/v1 (a fixed contract: tools
 * outside the project depend on it). Money travels as decimal strings; a JSON
 * number where money is expected is refused (422), never rounded.
 */

/** An admin route's schema: by default it answers the RPC's response in proto field names; errors are the platform's. */
function admin(rpc: keyof typeof AdminService.method, summary: string, { response, ...rest }: { response?: object; [part: string]: unknown } = {}) {
  const answer = response ?? { 200: restView(AdminService.method[rpc].output).schema };
  return operation("admin", rpc, summary, ADMIN_SECURITY, { ...rest, response: answer });
}

/** The Idempotency-Key of an operator's credit or adjustment (decision 0039), and the header of its replay. */
const MONEY_KEY_HEADERS = {
  type: "object",
  properties: {
    "idempotency-key": {
      type: "string",
      description:
        "Makes a retry safe: a repeat with the same key (per account, kept 24 h) and body returns the original answer and moves no money again, " +
        "even after a crash between the move and its answer. Another body under the key is 422 idempotency_key_reused; a key in progress 409.",
    },
  },
} as const;
const REPLAYED_HEADER = {
  "idempotent-replayed": { type: "string", enum: ["true"], description: "Present when this answer replays an earlier request with the same Idempotency-Key." },
} as const;

/** A key's limits in a request: decimal strings and whole numbers; null (or absent) is no limit. Ranges are the domain's (400 invalid_key_limit). */
const KEY_LIMITS_IN = describedFields(KeyLimitsSchema, {
  spend_limit: orNull({ type: "string" }),
  daily_spend_limit: orNull({ type: "string" }),
  monthly_spend_limit: orNull({ type: "string" }),
  rate_limit_per_minute: { type: ["number", "null"] },
  max_concurrent_jobs: { type: ["number", "null"] },
});

/** A key's limits as answered: null where there is none. */
export const KEY_LIMITS = restView(KeyLimitsSchema, {
  spend_limit: { schema: orNull(MONEY) },
  daily_spend_limit: { schema: orNull(MONEY) },
  monthly_spend_limit: { schema: orNull(MONEY) },
});

const remaining = (description: string) => ({ schema: { ...orNull(DECIMAL), description } });

/** A key as GET /admin/v1/keys/{key_id} shows it: grants, limits, and what it has spent and has left. */
export const API_KEY = restView(ApiKeySchema, {
  limits: { inline: KEY_LIMITS },
  rotation_grace_expire_time: {
    schema: { type: ["string", "null"], format: "date-time", description: "After a rotation with a grace: when the previous secret stops working; null otherwise." },
  },
  spent: { schema: DECIMAL },
  spent_today: { schema: DECIMAL },
  spent_this_month: { schema: DECIMAL },
  held: { schema: DECIMAL },
  remaining: remaining("spend_limit − spent − held (never below zero); null without a spend_limit."),
  remaining_today: remaining("daily_spend_limit − spent_today − held; null without one."),
  remaining_this_month: remaining("monthly_spend_limit − spent_this_month − held; null without one."),
});

const PAUSED_BODY = { type: "object", properties: { paused: { type: "boolean" } }, required: ["paused"], examples: [{ paused: true }] } as const;

const ACCOUNT = {
  type: "object",
  properties: { account_id: { type: "string" }, name: { type: "string" }, ...BALANCE.properties },
  required: ["account_id", "name", ...BALANCE.required],
} as const;

/** An account in the operator's list: its money inline (balance, reserved, available, currency), as GET …/balance answers it. */
export const ACCOUNT_SUMMARY = restView(AccountSummarySchema, {
  balance: { inline: { schema: BALANCE, json: (balance: Balance | undefined) => balanceJson(balance) } as unknown as RestView<never> },
});

/** One account's page (GET/PATCH /admin/v1/accounts/{id}): the summary's fields, its low-balance setting and state, its webhook URL. */
export const ACCOUNT_DETAILS = {
  schema: {
    type: "object",
    properties: {
      ...(ACCOUNT_SUMMARY.schema as { properties: Record<string, unknown> }).properties,
      low_balance_threshold: { ...orNull(MONEY), description: "balance.low is sent when available falls below it; null: no alert." },
      low_balance: { type: "boolean", description: "available is below low_balance_threshold (back at or above it re-arms the alert)." },
      webhook_url: { ...orNull({ type: "string" }), description: "The account webhook's URL; null when none is set." },
    },
    required: [...((ACCOUNT_SUMMARY.schema as { required?: string[] }).required ?? []), "low_balance_threshold", "low_balance", "webhook_url"],
  },
  json: (account: AccountDetails | undefined) => ({
    ...(ACCOUNT_SUMMARY.json(account?.summary as never) as object),
    low_balance_threshold: account?.lowBalanceThreshold ?? null,
    low_balance: account?.lowBalance ?? false,
    webhook_url: account?.webhookUrl ? account.webhookUrl : null,
  }),
};

/** A price as the admin API reads and writes it: ModelPrice in proto field names. */
const PRICE_OUT = protoJsonSchema(ModelPriceSchema, { direction: "output", names: "proto" });
const PRICE_IN = {
  ...protoJsonSchema(ModelPriceSchema, { direction: "input", names: "proto", omit: ["model"] }),
  examples: [{ input_per_million_tokens: "0.30", output_per_million_tokens: "2.50" }, { per_image: { "1K": "0.134", "2K": "0.134", "4K": "0.24" } }],
};

/** A built-in tool's per-call price (ToolPrice in proto field names); the tool is named by the path. */
const TOOL_PRICE_OUT = protoJsonSchema(ToolPriceSchema, { direction: "output", names: "proto" });
const TOOL_PRICE_IN = {
  type: "object",
  properties: { per_call: { ...MONEY_INPUT, description: "USD charged once for every call that declares the tool; zero allowed." } },
  required: ["per_call"],
  additionalProperties: false,
  examples: [{ per_call: "0.035" }],
};

/** An upstream route with its counters as plain numbers (they are int64 in the proto). */
const ROUTE = (() => {
  const schema = protoJsonSchema(UpstreamRouteSchema, { direction: "output", names: "proto" }) as { properties: Record<string, unknown> };
  return { ...schema, properties: { ...schema.properties, requests: { type: "integer" }, failures: { type: "integer" } } };
})();

/** A web panel session as the operator sees it: who and when, never its token. */
export const PANEL_SESSION = restView(PanelSessionSchema, {
  account_id: { emptyIsNull: true, schema: { description: "The owner's account; null for the operator." } },
  credential_id: { emptyIsNull: true, schema: { description: "The owner token it came from (revoking the token ends it); null for the operator." } },
});

/** One audit event as REST shows it: proto field names; empty account, subject, before and after are null. */
export const AUDIT_EVENT = restView(AuditEventSchema, {
  account_id: { emptyIsNull: true, schema: { description: "The account the change concerns; null for project-wide changes." } },
  subject: { emptyIsNull: true, schema: { description: "What was changed within the kind (a model, a route); null when the kind says it all." } },
  before: { emptyIsNull: true, schema: { description: "The value before, as JSON text; null when there was none. Never a secret." } },
  after: { emptyIsNull: true, schema: { description: "The value after, as JSON text; null when there is none. Never a secret (\"changed\")." } },
});

const AUDIT_TEXT = (description: string) => ({ type: "string", description }) as const;

/** Each admin route's schema, by the RPC it calls. */
export const ADMIN_SCHEMAS = {
  listAccounts: admin("listAccounts", "Accounts by name, or those whose name (case-insensitive) or id (q starting acct_) starts with q; paged", {
    querystring: {
      type: "object",
      properties: {
        q: { type: "string", description: "A prefix of the name (case-insensitive), or of the id when it starts with acct_; at most 200 characters." },
        limit: { type: "string", description: "Page size, an integer from 1 to 100; 20 when absent (otherwise 400 invalid_limit).", examples: ["20"] },
        page_token: { type: "string", description: "next_page_token of the previous page, with the same q (otherwise 400 invalid_page_token)." },
      },
    },
    response: {
      200: {
        type: "object",
        properties: { accounts: { type: "array", items: ACCOUNT_SUMMARY.schema }, next_page_token: orNull({ type: "string" }) },
        required: ["accounts", "next_page_token"],
      },
    },
  }),
  listAccountLedgerEntries: ADMIN_LEDGER_SCHEMA,
  getAccountUsage: ADMIN_USAGE_SCHEMA,
  listPanelSessions: admin("listPanelSessions", "The web panel's open sessions, newest first (never their tokens)", {
    querystring: {
      type: "object",
      properties: { limit: { type: "string", description: "At most this many, an integer from 1 to 1000; 100 when absent (otherwise 400 invalid_limit).", examples: ["100"] } },
    },
    response: {
      200: { type: "object", properties: { sessions: { type: "array", items: PANEL_SESSION.schema } }, required: ["sessions"] },
    },
  }),
  listAuditEvents: admin("listAuditEvents", "The audit trail: who changed money, permissions, prices, pauses, routes or webhooks", {
    description: "Newest first, paged like the statement. Bad parameters are 400 (invalid_limit, invalid_timestamp, invalid_time_range, " +
      "invalid_page_token, invalid_query) and change nothing.",
    querystring: {
      type: "object",
      properties: {
        limit: AUDIT_TEXT("Page size, an integer from 1 to 100; 20 when absent."),
        page_token: AUDIT_TEXT("next_page_token of the previous page, with the same filters."),
        from: { type: "string", format: "date-time", description: "Only events at or after this instant; 31 days before to when absent." },
        to: { type: "string", format: "date-time", description: "Only events strictly before this instant; now when absent; at most 92 days after from." },
        account_id: AUDIT_TEXT("Only the events of this account."),
        actor: AUDIT_TEXT("Only the events of this actor: admin, owner:<account_id> or key:<key_id>."),
        kind: AUDIT_TEXT("Only the events of this kind, e.g. model.paused, webhook.set."),
      },
    },
    response: {
      200: {
        type: "object",
        properties: { events: { type: "array", items: AUDIT_EVENT.schema }, next_page_token: { type: ["string", "null"] } },
        required: ["events", "next_page_token"],
      },
    },
  }),
  revokePanelSession: admin("revokePanelSession", "End a web panel session now (its next call is 401 session_revoked)"),
  createAccount: admin("createAccount", "Create an account with an initial balance", {
    body: {
      type: "object",
      properties: { name: { type: ["string", "null"] }, balance: orNull(MONEY_INPUT) },
      examples: [{ name: "me", balance: "10.00" }],
    },
    response: { 201: ACCOUNT },
  }),
  addCredits: admin("addCredits", "Add credits to an account", {
    body: {
      type: "object",
      properties: { amount: orNull(MONEY_INPUT), reason: { type: ["string", "null"], description: "Why (at most 500 characters); kept in the audit trail" } },
      required: ["amount"],
      examples: [{ amount: "25.00" }, { amount: "25.00", reason: "refund of ticket 1234" }],
    },
    headers: MONEY_KEY_HEADERS,
    response: { 200: { ...BALANCE, headers: REPLAYED_HEADER } },
  }),
  getAccountBalance: admin("getAccountBalance", "An account's balance", { response: { 200: BALANCE } }),
  createApiKey: admin("createApiKey", "Create an API key for an account, scoped to models", {
    body: {
      type: "object",
      properties: {
        ...describedFields(CreateApiKeyRequestSchema, { models: { type: "array", items: { type: "string" } }, name: { type: ["string", "null"] } }),
        ...KEY_LIMITS_IN,
      },
      required: ["models"],
      examples: [{ name: "ci", models: ["aimodel-3.5-flash", "aimodel-2.5-flash-image"] }, { models: ["*", "aimodel-3.1-flash-lite-image"] }, { models: ["*"], spend_limit: "25.00", daily_spend_limit: "5.00", rate_limit_per_minute: 60, max_concurrent_jobs: 4 }],
    },
    response: {
      201: {
        type: "object",
        description: "The key is shown once; only its hash is stored.",
        properties: {
          key_id: { type: "string" }, api_key: { type: "string" }, account_id: { type: "string" }, models: { type: "array", items: { type: "string" } },
          name: { type: "string" }, ...KEY_LIMITS.schema.properties,
        },
        required: ["key_id", "api_key", "account_id", "models", "name", ...KEY_LIMITS.schema.required],
      },
    },
  }),
  getApiKey: admin("getApiKey", "A key: its grants, its limits, what it has spent and what its limits leave", { response: { 200: API_KEY.schema } }),
  updateApiKey: admin("updateApiKey", "Change a key's name, grants and limits together (fields sent change; null removes a limit; fields left out keep theirs)", {
    body: {
      type: "object",
      properties: {
        ...describedFields(UpdateApiKeyRequestSchema, { name: { type: "string" }, models: { type: "array", items: { type: "string" } } }),
        ...KEY_LIMITS_IN,
      },
      additionalProperties: false,
      examples: [{ spend_limit: "50.00", rate_limit_per_minute: null }, { name: "ci", models: ["aimodel-3.5-flash"] }],
    },
    response: { 200: API_KEY.schema },
  }),
  rotateApiKey: admin("rotateApiKey", "Give a key a new secret (same key id, grants, limits and spending); the old one ends at once or after grace_seconds", {
    // A JSON body ({} for no grace) as on every route with a body: the document says it is required (@fastify/swagger).
    body: {
      type: "object",
      properties: describedFields(RotateApiKeyRequestSchema, { grace_seconds: { type: "integer", minimum: -2147483648, maximum: 2147483647 } }),
      additionalProperties: false,
      examples: [{ grace_seconds: 3600 }],
    },
    response: {
      200: { ...API_KEY.schema, properties: { ...API_KEY.schema.properties, api_key: { type: "string", description: "The new secret, shown this once." } },
        required: [...API_KEY.schema.required, "api_key"] },
    },
  }),
  revokeApiKey: admin("revokeApiKey", "Revoke an API key"),
  setWebhook: admin("setWebhook", "Set (or clear, with an empty url) the account-wide webhook", {
    body: { type: "object", properties: { url: { type: ["string", "null"], description: "An http(s) URL; empty or null clears it." } }, examples: [{ url: "https://example.com/hooks/generation" }] },
    response: {
      200: restView(SetWebhookResponseSchema, {}, {
        description: "`secret` signs every delivery (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature).",
      }).schema,
    },
  }),
  setProjectPaused: admin("setProjectPaused", "Pause or resume the whole project (new requests get 503)", { body: PAUSED_BODY }),
  setModelPaused: admin("setModelPaused", "Pause or resume one model", { body: PAUSED_BODY }),
  listRoutes: admin("listRoutes", "The upstream routes with their health and counters", {
    response: { 200: { type: "object", properties: { routes: { type: "array", items: ROUTE } }, required: ["routes"] } },
  }),
  setRoutePaused: admin("setRoutePaused", "Pause or resume one upstream route", { body: PAUSED_BODY }),
  listPrices: admin("listPrices", "Every model's prices, and the built-in tools' per-call prices", {
    response: {
      200: {
        type: "object",
        properties: { prices: { type: "array", items: PRICE_OUT }, tool_prices: { type: "array", items: TOOL_PRICE_OUT } },
        required: ["prices", "tool_prices"],
      },
    },
  }),
  updatePrice: admin("updatePrice", "Change a model's prices (per image, per second, or per 1M tokens)", {
    body: PRICE_IN,
    response: { 200: PRICE_OUT },
  }),
  setToolPrice: admin("setToolPrice", "Price a built-in tool per call (googleSearch, codeExecution, …): calls declaring it are charged it", {
    body: TOOL_PRICE_IN,
    response: { 200: TOOL_PRICE_OUT },
  }),
  deleteToolPrice: admin("deleteToolPrice", "Remove a built-in tool's price: calls declaring it are refused again (400)"),
  adjustBalance: admin("adjustBalance", "Adjust an account's balance by a signed amount with a reason (an `adjustment` statement entry)", {
    body: {
      type: "object",
      properties: {
        amount: { ...MONEY_INPUT, description: "Signed, non-zero decimal USD: \"-5.00\" debits (at most the available balance, else 409 insufficient_funds), \"2.50\" credits." },
        reason: { type: "string", description: "Why: required, 1 to 500 characters once trimmed (otherwise 422 invalid_reason); shown in the statement." },
      },
      required: ["amount", "reason"],
      additionalProperties: false,
      examples: [{ amount: "-5.00", reason: "refund for job 3f1c2a9e" }],
    },
    headers: MONEY_KEY_HEADERS,
    response: {
      201: {
        type: "object",
        properties: { ...BALANCE.properties, entry: LEDGER_ENTRY.schema },
        required: [...BALANCE.required, "entry"],
        headers: REPLAYED_HEADER,
      },
    },
  }),
  getAccount: admin("getAccount", "One account: name, status, money, open jobs, low-balance setting and state, webhook URL", {
    response: { 200: ACCOUNT_DETAILS.schema },
  }),
  updateAccount: admin("updateAccount", "Rename an account and/or set its low-balance threshold (fields sent change; a null threshold removes the alert)", {
    body: {
      type: "object",
      properties: {
        name: { type: "string", description: "The new name, 1 to 200 characters; the account list finds it by it at once." },
        low_balance_threshold: { ...orNull(MONEY_INPUT), description: "Decimal USD (at least 0.01): balance.low is sent once each time available falls below it; null removes it." },
      },
      additionalProperties: false,
      examples: [{ name: "Acme", low_balance_threshold: "10.00" }, { low_balance_threshold: null }],
    },
    response: { 200: ACCOUNT_DETAILS.schema },
  }),
} as const;
