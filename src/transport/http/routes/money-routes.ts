import type { FastifyInstance, FastifyRequest } from "fastify";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { GetUsageRequestSchema, ListLedgerEntriesRequestSchema } from "../../../../gen/generation/v1/generation_service_pb.js";
import { LedgerEntrySource, LedgerEntryType, UsageGrouping } from "../../../../gen/generation/v1/money_pb.js";
import { checkEntrySource, checkEntryType, checkGrouping, type CoreClients } from "../../../core/index.js";
import { platformCall } from "../call-options.js";
import type { BodyGuard } from "../edge/body-guard.js";
import { ledgerPageJson, usageJson } from "../json-mapping.js";
import { limitOf, queryRule, queryText, timestampOf } from "../query-params.js";
import { LEDGER_SCHEMA, USAGE_SCHEMA } from "../schemas/money.js";
import { CSV_PAGE_SIZE, csvFilename, sendStatementCsv, sendUsageCsv, wantsCsv } from "../csv-export.js";

const GROUPINGS = { model: UsageGrouping.MODEL, key: UsageGrouping.KEY, day: UsageGrouping.DAY } as const;

const ENTRY_TYPES = {
  credit: LedgerEntryType.CREDIT, hold: LedgerEntryType.HOLD, charge: LedgerEntryType.CHARGE, release: LedgerEntryType.RELEASE,
  adjustment: LedgerEntryType.ADJUSTMENT,
} as const;
const SOURCES = { job: LedgerEntrySource.JOB, text_call: LedgerEntrySource.TEXT_CALL } as const;
/** A usage CSV's group column, by grouping: the JSON row's field. */
export const USAGE_GROUP_COLUMNS = { model: "model", key: "key_id", day: "day" } as const;

/** The usage query's grouping, by its name (checked by usageRequest first). */
export const usageGroupOf = (request: FastifyRequest) => queryRule(() => checkGrouping(queryText(request).group_by));

/** The statement's query as a ListLedgerEntriesRequest; the values' rules are the domain's. */
export function statementRequest(request: FastifyRequest): MessageInitShape<typeof ListLedgerEntriesRequestSchema> {
  const query = queryText(request);
  const types = query.type === undefined || query.type === "" ? [] : query.type.split(",").map((name) => ENTRY_TYPES[queryRule(() => checkEntryType(name.trim()))]);
  const source = queryRule(() => checkEntrySource(query.source));
  return {
    limit: limitOf(query.limit), pageToken: query.page_token ?? "", from: timestampOf("from", query.from), to: timestampOf("to", query.to),
    types, model: query.model ?? "", keyId: query.key_id ?? "", source: source ? SOURCES[source] : LedgerEntrySource.UNSPECIFIED,
  };
}

/** An exported statement's query: `limit` is the size of each page read (the largest when absent), from `page_token` on. */
export function csvStatementRequest(request: FastifyRequest): MessageInitShape<typeof ListLedgerEntriesRequestSchema> {
  const query = statementRequest(request);
  return { ...query, limit: query.limit ?? CSV_PAGE_SIZE };
}

export function usageRequest(request: FastifyRequest): MessageInitShape<typeof GetUsageRequestSchema> {
  const query = queryText(request);
  const grouping = queryRule(() => checkGrouping(query.group_by));
  return { from: timestampOf("from", query.from), to: timestampOf("to", query.to), groupBy: GROUPINGS[grouping] };
}

/**
 * The key's account statement and usage. The key is checked before the query
 * (guard's onRequest: 401 first); attachValidation: the query schemas type
 * text only, so their one refusal (a repeated parameter) is answered 400 here.
 */
export function moneyRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    const { onRequest } = guard({ credential: "api_key", keyFrom: "platform", images: false });
    app.get("/api/v1/ledger", { onRequest, schema: LEDGER_SCHEMA, attachValidation: true }, async (request, reply) => {
      if (wantsCsv(request)) {
        const query = csvStatementRequest(request);
        return sendStatementCsv(reply, csvFilename("ledger"), query.pageToken ?? "", (pageToken) =>
          core.generation.listLedgerEntries({ ...query, pageToken }, platformCall(request, reply)));
      }
      const response = await core.generation.listLedgerEntries(statementRequest(request), platformCall(request, reply));
      reply.header("cache-control", "no-store");
      return ledgerPageJson(response);
    });

    app.get("/api/v1/usage", { onRequest, schema: USAGE_SCHEMA, attachValidation: true }, async (request, reply) => {
      const response = await core.generation.getUsage(usageRequest(request), platformCall(request, reply));
      if (wantsCsv(request)) return sendUsageCsv(reply, csvFilename("usage"), USAGE_GROUP_COLUMNS[usageGroupOf(request)], response);
      reply.header("cache-control", "no-store");
      return usageJson(response);
    });
  };
}
