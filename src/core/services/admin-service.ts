import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { auditOf, auditPage, type Audit } from "../audit/audit-trail.js";
import { AdminService } from "../../../gen/generation/v1/admin_service_pb.js";
import { GetUsageRequestSchema, ListLedgerEntriesRequestSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { accountList } from "../accounts/account-list.js";
import { addCredits, existingBalance, openAccount } from "../accounts/accounts.js";
import { adjustBalance } from "../accounts/adjustments.js";
import { onceUnderKey } from "../accounts/keyed-money.js";
import { accountChange, accountDetailsView, updateAccount } from "../accounts/account-settings.js";
import {
  accountKeys, checkGrants, existingKey, issueCredential, keyView, limitsMessage, parseLimitsMessage, revokeCredential, rotateKey, updateKey,
} from "../accounts/api-keys.js";
import { listOpenSessions, revokeOpenSession } from "../accounts/panel-sessions.js";
import { requireAdmin } from "../auth/admin-auth.js";
import { pauseModel, priceList, updatePrice } from "../catalog/models.js";
import { deleteToolPrice, setToolPrice, toolPriceList } from "../catalog/tool-prices.js";
import { pauseRoute, routeList } from "../catalog/upstream-routes.js";
import type { CoreDeps } from "../core-deps.js";
import { rpc } from "../errors/rpc-errors.js";
import { statementPage, usageReport } from "../money/statement.js";
import { deliveryLimit, deliveryMessage, redeliver, setWebhookUrl } from "../webhooks/account-webhook.js";
import { balanceView } from "./balance-view.js";

/**
 * What the operator manages (proto: AdminService): accounts and their money,
 * keys and owner tokens, panel sessions, webhooks, pauses, prices and routes.
 * Each call is the use case of core/accounts, core/catalog or core/webhooks it names.
 */
export function createAdminService(deps: CoreDeps): ServiceImpl<typeof AdminService> {
  /** Every admin answer leaves once what it changed (accounts, money, keys, settings) is on disk. */
  const admin = <T>(headers: Headers, work: () => Promise<T>) =>
    rpc(async () => {
      await requireAdmin(headers, deps);
      const result = await work();
      await deps.durability.flush();
      return result;
    });
  /** The account the request names, refused as account_not_found before anything is done for it. */
  const ofAccount = <T>(headers: Headers, accountId: string, work: () => Promise<T>) =>
    admin(headers, async () => {
      await existingBalance(deps.ledger, accountId);
      return work();
    });

  /** The operator's changes: actor "admin" (the admin token or an operator's panel session). */
  const byAdmin = (context: HandlerContext) => auditOf(deps.clock, context, "admin");

  return {
    createAccount: (request, context) => admin(context.requestHeader, () => openAccount(deps, request.name, request.balance)),

    getAccountBalance: (request, context) =>
      admin(context.requestHeader, async () => ({ balance: balanceView(await existingBalance(deps.ledger, request.accountId)) })),

    listAccountLedgerEntries: (request, context) =>
      ofAccount(context.requestHeader, request.accountId, () =>
        statementPage(deps.ledger, deps.settingsOf.urlSigningSecret, request.accountId, request.query ?? create(ListLedgerEntriesRequestSchema))),

    getAccountUsage: (request, context) =>
      ofAccount(context.requestHeader, request.accountId, async () => ({
        usage: await usageReport(deps.ledger, request.accountId, request.query ?? create(GetUsageRequestSchema), deps.clock.now()),
      })),

    createApiKey: (request, context) =>
      ofAccount(context.requestHeader, request.accountId, async () => {
        checkGrants(request.models);
        const limits = parseLimitsMessage(request.limits);
        const { record, secret } = await issueCredential(deps, request.accountId, "key", request.models, limits, request.name, byAdmin(context));
        return { keyId: record.keyId, apiKey: secret, models: request.models, accountId: request.accountId, limits: limitsMessage(limits), name: request.name };
      }),

    getApiKey: (request, context) =>
      admin(context.requestHeader, async () => ({ key: await keyView(deps, await existingKey(deps.apiKeys, request.keyId)) })),

    updateApiKey: (request, context) =>
      admin(context.requestHeader, async () => {
        const record = await updateKey(deps, await existingKey(deps.apiKeys, request.keyId), request, byAdmin(context));
        return { key: await keyView(deps, record) };
      }),

    revokeApiKey: (request, context) =>
      admin(context.requestHeader, async () => {
        await revokeCredential(deps, request.keyId, byAdmin(context));
        return { keyId: request.keyId, revoked: true };
      }),

    listAccountApiKeys: (request, context) =>
      ofAccount(context.requestHeader, request.accountId, async () => ({ keys: await accountKeys(deps, request.accountId) })),

    createOwnerToken: (request, context) =>
      ofAccount(context.requestHeader, request.accountId, async () => {
        const { record, secret } = await issueCredential(deps, request.accountId, "owner", [], {}, "", byAdmin(context));
        return { tokenId: record.keyId, ownerToken: secret, accountId: request.accountId };
      }),

    listPanelSessions: (request, context) =>
      admin(context.requestHeader, async () => ({ sessions: await listOpenSessions(deps, request.limit) })),

    revokePanelSession: (request, context) =>
      admin(context.requestHeader, async () => {
        await revokeOpenSession(deps, request.sessionId, byAdmin(context));
        return { sessionId: request.sessionId, revoked: true };
      }),

    setWebhook: (request, context) =>
      ofAccount(context.requestHeader, request.accountId, () => setWebhookUrl(deps, request.accountId, request.url, byAdmin(context))),

    listWebhookDeadLetters: (request, context) =>
      admin(context.requestHeader, async () => ({
        deliveries: (await deps.deliveries.listExhausted(deliveryLimit(request.limit))).map(deliveryMessage),
      })),

    redeliverDeadLetter: (request, context) =>
      admin(context.requestHeader, async () => ({ delivery: deliveryMessage(await redeliver(deps, request.messageId)) })),

    setProjectPaused: (request, context) =>
      admin(context.requestHeader, () => pauseProject(deps.settings, request.paused, byAdmin(context))),

    setModelPaused: (request, context) =>
      admin(context.requestHeader, () => pauseModel(deps.settings, request.model, request.paused, byAdmin(context))),

    listPrices: (_request, context) =>
      admin(context.requestHeader, async () => ({ prices: await priceList(deps.settings), toolPrices: await toolPriceList(deps.settings) })),

    listRoutes: (_request, context) => admin(context.requestHeader, async () => ({ routes: await routeList(deps.provider) })),

    setRoutePaused: (request, context) => admin(context.requestHeader, () => pauseRoute(deps, request.name, request.paused, byAdmin(context))),

    updatePrice: (request, context) => admin(context.requestHeader, async () => ({ price: await updatePrice(deps.settings, request.price, byAdmin(context)) })),

    rotateApiKey: (request, context) =>
      admin(context.requestHeader, async () => {
        const { record, secret } = await rotateKey(deps, await existingKey(deps.apiKeys, request.keyId), request.graceSeconds, byAdmin(context));
        return { key: await keyView(deps, record), apiKey: secret };
      }),

    listAccounts: (request, context) => admin(context.requestHeader, () => accountList(deps, request)),

    listAuditEvents: (request, context) => admin(context.requestHeader, () => auditPage(deps, deps.settingsOf.urlSigningSecret, request)),

    setToolPrice: (request, context) => admin(context.requestHeader, async () => ({ price: await setToolPrice(deps.settings, request.price, byAdmin(context)) })),

    deleteToolPrice: (request, context) => admin(context.requestHeader, () => deleteToolPrice(deps.settings, request.tool, byAdmin(context))),
    ...moneyHandlers(deps, admin),
    ...accountPageHandlers(deps, admin),
  };
}

/**
 * The operator's money: credits and adjustments (decision 0037), each applied once under an Idempotency-Key
 * (decision 0039).
 */
function moneyHandlers(
  deps: CoreDeps, admin: <T>(headers: Headers, work: () => Promise<T>) => Promise<T>,
): Pick<ServiceImpl<typeof AdminService>, "addCredits" | "adjustBalance"> {
  return {
    addCredits: ({ idempotencyKey, ...request }, context) =>
      admin(context.requestHeader, () =>
        onceUnderKey(deps, { accountId: request.accountId, key: idempotencyKey, operation: "admin.credits", request: requestFields(request) }, (operationId, replay) =>
          addCredits(deps.ledger, request.accountId, request.amount, request.reason, auditOf(deps.clock, context, "admin"), { operationId, replay }))),

    adjustBalance: ({ idempotencyKey, ...request }, context) =>
      admin(context.requestHeader, () =>
        onceUnderKey(deps, { accountId: request.accountId, key: idempotencyKey, operation: "admin.adjustments", request: requestFields(request) }, (operationId, replay) =>
          adjustBalance(deps.ledger, request.accountId, request.amount, request.reason, auditOf(deps.clock, context, "admin"), { operationId, replay }))),
  };
}

/** An account's page: its details and settings (decision 0038). */
function accountPageHandlers(
  deps: CoreDeps, admin: <T>(headers: Headers, work: () => Promise<T>) => Promise<T>,
): Pick<ServiceImpl<typeof AdminService>, "getAccount" | "updateAccount"> {
  return {
    getAccount: (request, context) => admin(context.requestHeader, async () => ({ account: await accountDetailsView(deps, request.accountId) })),

    updateAccount: (request, context) =>
      admin(context.requestHeader, async () => {
        const change = accountChange(request.updateMask?.paths ?? [], request.name, request.lowBalanceThreshold);
        return { account: await accountDetailsView(deps, request.accountId, await updateAccount(deps, request.accountId, change)) };
      }),
  };
}

/** What a money request asks, as its Idempotency-Key's fingerprint reads it: its fields, without the message's type tag. */
const requestFields = ({ accountId, amount, reason }: { accountId: string; amount: string; reason: string }) => ({ accountId, amount, reason });

/** Pauses or resumes the whole project; the audit trail records it with the value it replaced. */
async function pauseProject(settings: CoreDeps["settings"], paused: boolean, by: Audit) {
  const change = { before: { paused: await settings.isProjectPaused() }, after: { paused } };
  await settings.setProjectPaused(paused, by("project.paused", change));
  return { paused };
}
