import type { FastifyInstance } from "fastify";
import type { CoreClients } from "../../../../core/index.js";
import type { BodyGuard } from "../../edge/body-guard.js";
import { balanceJson, ledgerEntryJson, usageJson } from "../../json-mapping.js";
import { ADMIN_SCHEMAS as S } from "../../schemas/admin.js";
import { ADMIN_LEDGER_SCHEMA, ADMIN_USAGE_SCHEMA } from "../../schemas/money.js";
import { statementRequest, usageRequest, type StatementQueryText, type UsageQueryText } from "../money-routes.js";
import { ADMIN_BODY, adminCall, stringField } from "./admin-call.js";

/** /admin/v1/accounts: accounts opened and credited, their balance, statement, usage and webhook. */
export function accountRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    const withBody = guard(ADMIN_BODY);
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

    const adminQuery = withBody.onRequest;
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

    app.put<{ Params: { accountId: string } }>("/admin/v1/accounts/:accountId/webhook", { ...withBody, schema: S.setWebhook }, async (request) => {
      const response = await core.admin.setWebhook(
        { accountId: request.params.accountId, url: stringField(request.body, "url", false) },
        adminCall(request),
      );
      return { url: response.url, secret: response.secret };
    });
  };
}
