import { DECIMAL, MONEY, PLATFORM_SECURITY, ADMIN_SECURITY, operation } from "./common.js";
import { GetUsageResponseSchema } from "../../../../gen/generation/v1/generation_service_pb.js";
import { LedgerEntrySchema, UsageRowSchema } from "../../../../gen/generation/v1/money_pb.js";
import { orNull } from "./proto-json-schema.js";
import { restView } from "./rest-view.js";

/**
 * Schemas of the account statement and usage reports (issue 10): GET
 * /api/v1/ledger and /api/v1/usage for the key's account, and the same under
 * /admin/v1/accounts/{accountId} for any account. Query values are text: their
 * rules are the domain's (src/domain/ledger/), answered 400 with its codes.
 */

/** One entry of GET /api/v1/ledger: every field present, null where it does not apply. */
export const LEDGER_ENTRY = restView(LedgerEntrySchema, {
  amount: { schema: DECIMAL },
  balance_after: { schema: { ...MONEY, description: "The balance after this entry; the newest entry's equals GET /api/v1/balance's balance." } },
  job_id: { schema: { description: "The job the hold was for; null for credits and synchronous text calls." } },
  model: { schema: { description: "The model the hold was for; null for credits." } },
  reserved_change: { schema: DECIMAL },
  reserved_after: { schema: DECIMAL },
  key_id: { schema: { description: "The API key that asked for the hold; null for credits." } },
  reason: {
    emptyIsNull: true,
    schema: {
      description:
        "On a release: why nothing was charged. job_failed (the job failed), job_canceled (the job was canceled), client_gone (the job " +
        "was canceled because its acceptance could not be answered: the client went away first, with no Idempotency-Key), " +
        "nothing_delivered (a synchronous text call delivered nothing), abandoned (the request died before finishing; the reaper or a " +
        "retry ended its hold). null on other entries and on releases recorded before reasons were; treat an unknown value as null.",
    },
  },
  adjustment_reason: { emptyIsNull: true, schema: { description: "On an adjustment: the operator's reason. null on other entries." } },
});

const STATEMENT = {
  type: "object",
  description: "Entries newest first; pass next_page_token as page_token (with the same from, to and filters) for the next page; null on the last.",
  properties: {
    entries: { type: "array", items: LEDGER_ENTRY.schema },
    next_page_token: { ...orNull({ type: "string" }) },
  },
  required: ["entries", "next_page_token"],
  examples: [{
    entries: [
      {
        entry_id: "3000000", type: "charge", amount: "-0.039", balance_after: "9.961", job_id: "3f1c2a9e-0b7d-4c55-9a51-2f0f3e7c6d41",
        model: "aimodel-2.5-flash-image", created_at: "2026-11-23T10:00:02.480Z", reserved_change: "-0.039", reserved_after: "0.00",
        key_id: "key_0f3e7c6d41", prompt_token_count: 0, candidates_token_count: 0, reason: null, adjustment_reason: null,
      },
    ],
    next_page_token: null,
  }],
} as const;

const TIME = (what: string) => ({ type: "string", format: "date-time", description: `${what} (RFC 3339; otherwise 400 invalid_timestamp).` }) as const;

export const STATEMENT_QUERY = {
  type: "object",
  properties: {
    limit: { type: "string", description: "Page size, an integer from 1 to 100; 20 when absent (otherwise 400 invalid_limit).", examples: ["20"] },
    page_token: { type: "string", description: "next_page_token of the previous page, with the same from, to and filters (otherwise 400 invalid_page_token)." },
    from: TIME("Only entries written at or after this instant"),
    to: TIME("Only entries written strictly before this instant; not before from (400 invalid_time_range)"),
    type: {
      type: "string", examples: ["charge,release"],
      description: "Only entries of these types, comma-separated: credit, hold, charge, release, adjustment (otherwise 400 invalid_entry_type).",
    },
    model: { type: "string", description: "Only entries of holds for this model; credits never match (an unknown model: 400 invalid_model)." },
    key_id: { type: "string", description: "Only entries of holds asked by this API key or owner token; credits never match." },
    source: {
      type: "string", examples: ["text_call"],
      description: "job (entries with a job_id) or text_call (synchronous text calls: a model and no job_id); otherwise 400 invalid_entry_source.",
    },
  },
} as const;

export const USAGE_QUERY = {
  type: "object",
  properties: {
    from: TIME("Start of the range, inclusive; 30 days before `to` when absent"),
    to: TIME("End of the range, exclusive; now when absent. At most 366 days after from (400 invalid_time_range)"),
    group_by: { type: "string", description: "model (default), key or day (otherwise 400 invalid_group_by).", examples: ["model"] },
  },
} as const;

const USAGE_ROW = restView(UsageRowSchema, {
  model: { schema: { description: "With group_by=model." } },
  key_id: { schema: { description: "With group_by=key." } },
  day: { schema: { description: "With group_by=day: YYYY-MM-DD (UTC)." } },
  spend: { schema: MONEY },
});

/** GET /api/v1/usage: the group under its own name (model, key_id or day). */
export const USAGE = restView(GetUsageResponseSchema, {
  rows: { schema: { type: "array", items: USAGE_ROW.schema }, json: (usage) => usage.rows.map(USAGE_ROW.json) },
}, {
  description: "Settled charges only, grouped; rows in the group's order. Spend is exact.",
  examples: [{
    from: "2026-10-24T10:00:00.000Z", to: "2026-11-23T10:00:00.000Z",
    rows: [{ model: "aimodel-2.5-flash-image", requests: 3, prompt_token_count: 0, candidates_token_count: 0, spend: "0.117" }],
  }],
});

/** The same 200 answer as CSV with Accept: text/csv (csv-export.ts): a header line, then one record per row, RFC 4180. */
const asJsonOrCsv = (json: object, csv: string) => ({
  description: "JSON by default; CSV when the request's Accept names text/csv at least as highly as application/json.",
  content: {
    "application/json": { schema: json },
    "text/csv": { schema: { type: "string", description: csv } },
  },
});

const RANGE_ERRORS = "Bad parameters are 400 (invalid_limit, invalid_timestamp, invalid_time_range, invalid_page_token, invalid_entry_type, " +
  "invalid_model, invalid_entry_source, invalid_query) and change nothing. With a filter a page may hold fewer entries than limit and " +
  "still have a next_page_token (a page reads at most 2000 entries).";

export const LEDGER_SCHEMA = operation(
  "money", "listLedgerEntries", "The key's account statement: every credit, hold, charge and release, newest first", PLATFORM_SECURITY, {
  description: `Immutable entries, each with the balance after it; the sum of the amounts is the balance. ${RANGE_ERRORS}`,
  querystring: STATEMENT_QUERY,
  response: {
    200: asJsonOrCsv(STATEMENT, "Streamed: the header line entry_id,type,amount,balance_after,reserved_change,reserved_after,job_id,model," +
      "key_id,prompt_token_count,candidates_token_count,reason,created_at, then every entry from page_token (the first page when absent) " +
      "to the last, newest first, exactly as in JSON (amounts as exact decimal strings; null as an empty field); limit is the size of each " +
      "page read (100 when absent). Content-Disposition: attachment."),
  },
});

export const USAGE_SCHEMA = operation(
  "money", "getUsage", "The key's account usage from settled charges: requests, tokens and spend by model, key or day", PLATFORM_SECURITY, {
  description: "Bad parameters are 400 (invalid_timestamp, invalid_time_range, invalid_group_by, invalid_query) and change nothing.",
  querystring: USAGE_QUERY,
  response: {
    200: asJsonOrCsv(USAGE.schema, "The header line <model|key_id|day>,requests,prompt_token_count,candidates_token_count,spend, then " +
      "one record per row, exactly as in JSON. Content-Disposition: attachment."),
  },
});

export const ADMIN_LEDGER_SCHEMA = {
  ...LEDGER_SCHEMA,
  tags: ["admin"],
  operationId: "listAccountLedgerEntries",
  summary: "Any account's statement",
  security: ADMIN_SECURITY,
} as const;

export const ADMIN_USAGE_SCHEMA = {
  ...USAGE_SCHEMA,
  tags: ["admin"],
  operationId: "getAccountUsage",
  summary: "Any account's usage report",
  security: ADMIN_SECURITY,
} as const;
