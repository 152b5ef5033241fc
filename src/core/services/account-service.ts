import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { ListAuditEventsRequestSchema } from "../../../gen/generation/v1/admin_service_pb.js";
import { auditOf, auditPage } from "../audit/audit-trail.js";
import { AccountService } from "../../../gen/generation/v1/account_service_pb.js";
import { accountChange, lowBalanceView, updateAccount } from "../accounts/account-settings.js";
import { accountNotFound } from "../accounts/accounts.js";
import {
  accountKeys, checkGrants, issueCredential, keyOfAccount, keyView, parseLimitsMessage, revokeKey, rotateKey, updateKey,
} from "../accounts/api-keys.js";
import { endSession, startSession } from "../accounts/panel-sessions.js";
import { authenticateOwner, type Owner } from "../auth/owner-auth.js";
import type { CoreDeps } from "../core-deps.js";
import { rpc } from "../errors/rpc-errors.js";
import { balanceView } from "./balance-view.js";
import {
  accountWebhook, deliveryLimit, deliveryMessage, redeliver, rotateWebhookSecret, sendTestEvent, setWebhookUrl,
} from "../webhooks/account-webhook.js";

/**
 * What an account's owner manages (proto: AccountService): its keys and the
 * account itself, and the panel session that lets a browser do it. Every
 * rule lives where the operator's calls use it too (core/accounts).
 */
export function createAccountService(deps: CoreDeps): ServiceImpl<typeof AccountService> {
  /** Every call of the owner leaves once what it changed is on disk. */
  const owner = <T>(headers: Headers, work: (owner: Owner) => Promise<T>) =>
    rpc(async () => {
      const result = await work(await authenticateOwner(headers, deps));
      await deps.durability.flush();
      return result;
    });

  /** The owner's changes: actor "owner:<account_id>" (an owner token or a panel session of one). */
  const byOwner = (context: HandlerContext, accountId: string) => auditOf(deps.clock, context, `owner:${accountId}`);

  return {
    startSession: (_request, context) => startSession(deps, context.requestHeader, (actor) => auditOf(deps.clock, context, actor)),

    endSession: async (_request, context) => {
      await endSession(deps, context.requestHeader, (actor) => auditOf(deps.clock, context, actor));
      return {};
    },

    getAccount: (_request, context) =>
      owner(context.requestHeader, async ({ accountId }) => {
        const account = await deps.ledger.account(accountId);
        if (!account) throw accountNotFound(accountId);
        return { accountId, balance: balanceView(account), name: account.name, ...lowBalanceView(account) };
      }),

    listApiKeys: (_request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({ keys: await accountKeys(deps, accountId) })),

    createAccountApiKey: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => {
        checkGrants(request.models);
        const limits = parseLimitsMessage(request.limits);
        const { record, secret: apiKey } = await issueCredential(deps, accountId, "key", request.models, limits, request.name, byOwner(context, accountId));
        return { key: await keyView(deps, record), apiKey };
      }),

    updateAccountApiKey: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => {
        const record = await updateKey(deps, await keyOfAccount(deps.apiKeys, accountId, request.keyId), request, byOwner(context, accountId));
        return { key: await keyView(deps, record) };
      }),

    revokeAccountApiKey: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => {
        const record = await keyOfAccount(deps.apiKeys, accountId, request.keyId);
        await revokeKey(deps, record, byOwner(context, accountId));
        return { key: await keyView(deps, { ...record, revoked: true }) };
      }),

    getAccountWebhook: (_request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({ webhook: await accountWebhook(deps, accountId) })),

    setAccountWebhook: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({
        webhook: await setWebhookUrl(deps, accountId, request.url, byOwner(context, accountId)),
      })),

    rotateWebhookSecret: (_request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({ webhook: await rotateWebhookSecret(deps, accountId, byOwner(context, accountId)) })),

    sendTestWebhook: (_request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({ delivery: deliveryMessage(await sendTestEvent(deps, accountId)) })),

    listWebhookDeliveries: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({
        deliveries: (await deps.deliveries.listByAccount(accountId, deliveryLimit(request.limit))).map(deliveryMessage),
      })),

    redeliverWebhook: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({ delivery: deliveryMessage(await redeliver(deps, request.messageId, accountId)) })),

    rotateAccountApiKey: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => {
        const { record, secret: apiKey } = await rotateKey(deps, await keyOfAccount(deps.apiKeys, accountId, request.keyId), request.graceSeconds, byOwner(context, accountId));
        return { key: await keyView(deps, record), apiKey };
      }),
    listAuditEvents: (request, context) =>
      owner(context.requestHeader, ({ accountId }) =>
        auditPage(deps, deps.settingsOf.urlSigningSecret, request.query ?? create(ListAuditEventsRequestSchema), accountId)),

    updateAccount: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => {
        const account = await updateAccount(deps, accountId, accountChange(request.updateMask?.paths ?? [], request.name, request.lowBalanceThreshold));
        return { account: { accountId, balance: balanceView(account), name: account.name, ...lowBalanceView(account) } };
      }),
  };
}
