import { checkTextLength, MAX_NAME_CHARACTERS } from "../../domain/validation/text-fields.js";
import { randomUUID } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { AdminService, PanelSessionRole } from "../../../gen/generation/v1/admin_service_pb.js";
import { credentialFingerprint, sameFingerprint } from "../../domain/accounts/panel-session.js";
import { findModel, MODELS } from "../../domain/catalog/models.js";
import { badRequest, DomainError } from "../../domain/errors/domain-error.js";
import type { ApiKeyRecord } from "../../ports/api-key-store.js";
import { formatModelPrices, parseModelPrices, type ModelPricesText } from "../../domain/pricing/price-table.js";
import {
  checkBalanceAfterCredit, checkPriceTexts, MAX_CREDIT, MAX_OPENING_BALANCE, parseAmountField,
} from "../../domain/validation/amounts.js";
import { newWebhookSecret } from "../webhooks/webhook-requests.js";
import { deliveryLimit, deliveryMessage, redeliver, setWebhookUrl } from "../webhooks/account-webhook.js";
import { requireAdmin } from "../auth/admin-auth.js";
import { accountKeys, checkGrants, issueCredential, keyNotFound, keyView, limitsMessage, parseLimitsMessage, updateKeyLimits } from "../accounts/api-keys.js";
import type { CoreDeps } from "../core-deps.js";
import { rpc } from "../errors/rpc-errors.js";
import { balanceView } from "./balance-view.js";
import { statementPage, usageReport } from "../money/statement.js";
import { create } from "@bufbuild/protobuf";
import { GetUsageRequestSchema, ListLedgerEntriesRequestSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { priceMessage } from "./generation-service.js";

/** Money an operator sends: strict decimal, bounded; a refusal names the field (422 invalid_amount). */
const amount = (field: string, value: string, { allowZero, max }: { allowZero: boolean; max: bigint }): bigint =>
  parseAmountField(field, value, { reason: "invalid_amount", allowZero, max });

function knownModel(id: string) {
  const model = findModel(id);
  if (!model) throw new DomainError("not_found", "unknown_model", `unknown model "${id}"`);
  return model;
}


/** The operator's session listing: its default and largest page. */
const DEFAULT_SESSION_LISTING = 100;
const MAX_SESSION_LISTING = 1_000;

export function createAdminService(deps: CoreDeps): ServiceImpl<typeof AdminService> {
  /** Every admin answer leaves once what it changed (accounts, money, keys, settings) is on disk. */
  const admin = <T>(headers: Headers, work: () => Promise<T>) =>
    rpc(async () => {
      await requireAdmin(headers, deps);
      const result = await work();
      await deps.durability.flush();
      return result;
    });

  /** A key (never an owner token: those are revoked, not managed). */
  async function existingKey(keyId: string, { owners = false } = {}): Promise<ApiKeyRecord> {
    const record = keyId === "" ? undefined : await deps.apiKeys.get(keyId);
    if (!record || (!owners && record.role === "owner")) throw keyNotFound(keyId);
    return record;
  }

  async function existingBalance(accountId: string) {
    const snapshot = await deps.ledger.balance(accountId);
    if (!snapshot) throw new DomainError("not_found", "account_not_found", `no account ${accountId}`);
    return snapshot;
  }

  return {
    createAccount: (request, context) =>
      admin(context.requestHeader, async () => {
        checkTextLength("name", request.name, MAX_NAME_CHARACTERS);
        const initial = request.balance === "" ? 0n : amount("balance", request.balance, { allowZero: true, max: MAX_OPENING_BALANCE });
        const accountId = `acct_${randomUUID().replaceAll("-", "")}`;
        await deps.ledger.createAccount(accountId, request.name, initial);
        await deps.settings.setWebhook(accountId, { url: "", secret: newWebhookSecret() });
        return { accountId, name: request.name, balance: balanceView(await existingBalance(accountId)) };
      }),

    addCredits: (request, context) =>
      admin(context.requestHeader, async () => {
        const credit = amount("amount", request.amount, { allowZero: false, max: MAX_CREDIT });
        // Checked before the credit, not in the same step: concurrent credits may pass the maximum by at most one credit.
        checkBalanceAfterCredit((await existingBalance(request.accountId)).balance, credit);
        const snapshot = await deps.ledger.credit(request.accountId, credit);
        if (!snapshot) throw new DomainError("not_found", "account_not_found", `no account ${request.accountId}`);
        return { balance: balanceView(snapshot) };
      }),

    getAccountBalance: (request, context) =>
      admin(context.requestHeader, async () => ({ balance: balanceView(await existingBalance(request.accountId)) })),

    listAccountLedgerEntries: (request, context) =>
      admin(context.requestHeader, async () => {
        await existingBalance(request.accountId);
        return statementPage(deps.ledger, deps.settingsOf.urlSigningSecret, request.accountId, request.query ?? create(ListLedgerEntriesRequestSchema));
      }),

    getAccountUsage: (request, context) =>
      admin(context.requestHeader, async () => {
        await existingBalance(request.accountId);
        return { usage: await usageReport(deps.ledger, request.accountId, request.query ?? create(GetUsageRequestSchema), deps.clock.now()) };
      }),

    createApiKey: (request, context) =>
      admin(context.requestHeader, async () => {
        await existingBalance(request.accountId);
        checkGrants(request.models);
        const limits = parseLimitsMessage(request.limits);
        const { record, secret } = await issueCredential(deps, request.accountId, "key", request.models, limits);
        return { keyId: record.keyId, apiKey: secret, models: request.models, accountId: request.accountId, limits: limitsMessage(limits) };
      }),

    getApiKey: (request, context) =>
      admin(context.requestHeader, async () => ({ key: await keyView(deps, await existingKey(request.keyId)) })),

    updateApiKey: (request, context) =>
      admin(context.requestHeader, async () => {
        const record = await updateKeyLimits(deps, await existingKey(request.keyId), request.limits, request.updateMask);
        return { key: await keyView(deps, record) };
      }),

    revokeApiKey: (request, context) =>
      admin(context.requestHeader, async () => {
        const record = await existingKey(request.keyId, { owners: true });
        if (!(await deps.apiKeys.revoke(request.keyId))) throw keyNotFound(request.keyId);
        // A revoked owner token's sessions are refused anyway (ownerOfSession); their records end too, so no listing shows them open.
        if (record.role === "owner") await deps.panelSessions.revokeByCredential(record.keyId, deps.clock.now());
        return { keyId: request.keyId, revoked: true };
      }),

    listAccountApiKeys: (request, context) =>
      admin(context.requestHeader, async () => {
        await existingBalance(request.accountId);
        return { keys: await accountKeys(deps, request.accountId) };
      }),

    createOwnerToken: (request, context) =>
      admin(context.requestHeader, async () => {
        await existingBalance(request.accountId);
        const { record, secret } = await issueCredential(deps, request.accountId, "owner", [], {});
        return { tokenId: record.keyId, ownerToken: secret, accountId: request.accountId };
      }),

    listPanelSessions: (request, context) =>
      admin(context.requestHeader, async () => {
        const limit = request.limit ?? DEFAULT_SESSION_LISTING;
        if (!Number.isInteger(limit) || limit < 1 || limit > MAX_SESSION_LISTING) {
          throw badRequest("invalid_limit", `limit must be between 1 and ${MAX_SESSION_LISTING}`, { field: "limit" });
        }
        const now = deps.clock.now();
        const operatorFingerprint = credentialFingerprint(deps.settingsOf.urlSigningSecret, deps.settingsOf.adminToken);
        const open = await deps.panelSessions.listOpen(now, limit);
        return {
          sessions: open
            // An operator session of another admin token is ended already (checkOpen refuses it).
            .filter((session) => session.role === "owner" || sameFingerprint(session.credentialFingerprint, operatorFingerprint))
            .map((session) => ({
              sessionId: session.sessionId,
              role: session.role === "owner" ? PanelSessionRole.OWNER : PanelSessionRole.OPERATOR,
              accountId: session.accountId,
              credentialId: session.credentialId,
              createTime: timestampFromDate(session.createdAt),
              expireTime: timestampFromDate(session.expiresAt),
            })),
        };
      }),

    revokePanelSession: (request, context) =>
      admin(context.requestHeader, async () => {
        if (request.sessionId === "" || !(await deps.panelSessions.revoke(request.sessionId, deps.clock.now()))) {
          throw new DomainError("not_found", "panel_session_not_found", `no open panel session ${request.sessionId}`);
        }
        return { sessionId: request.sessionId, revoked: true };
      }),

    setWebhook: (request, context) =>
      admin(context.requestHeader, async () => {
        await existingBalance(request.accountId);
        return setWebhookUrl(deps, request.accountId, request.url);
      }),

    listWebhookDeadLetters: (request, context) =>
      admin(context.requestHeader, async () => ({
        deliveries: (await deps.deliveries.listExhausted(deliveryLimit(request.limit))).map(deliveryMessage),
      })),

    redeliverDeadLetter: (request, context) =>
      admin(context.requestHeader, async () => ({ delivery: deliveryMessage(await redeliver(deps, request.messageId)) })),

    setProjectPaused: (request, context) =>
      admin(context.requestHeader, async () => {
        await deps.settings.setProjectPaused(request.paused);
        return { paused: request.paused };
      }),

    setModelPaused: (request, context) =>
      admin(context.requestHeader, async () => {
        const model = knownModel(request.model);
        await deps.settings.setModelPaused(model.id, request.paused);
        return { model: model.id, paused: request.paused };
      }),

    listPrices: (_request, context) =>
      admin(context.requestHeader, async () => {
        const prices = await deps.settings.prices();
        return { prices: MODELS.map((m) => ({ model: m.id, ...priceMessage(formatModelPrices(prices.get(m.id))) })) };
      }),

    listRoutes: (_request, context) =>
      admin(context.requestHeader, async () => ({
        routes: (await deps.provider.routes()).map((route) => ({
          name: route.name,
          baseUrl: route.baseUrl,
          models: [...route.models],
          weight: route.weight,
          timeoutMs: route.timeoutMs,
          maxInputImages: route.maxInputImages,
          paused: route.paused,
          healthy: route.healthy,
          requests: BigInt(route.requests),
          failures: BigInt(route.failures),
          consecutiveFailures: route.consecutiveFailures,
          lastError: route.lastError ?? "",
          lastErrorAt: route.lastErrorAt && timestampFromDate(route.lastErrorAt),
          lastSuccessAt: route.lastSuccessAt && timestampFromDate(route.lastSuccessAt),
        })),
      })),

    setRoutePaused: (request, context) =>
      admin(context.requestHeader, async () => {
        checkTextLength("name", request.name, MAX_NAME_CHARACTERS);
        if (!(await deps.provider.routes()).some((route) => route.name === request.name)) {
          throw new DomainError("not_found", "route_not_found", `no upstream route named "${request.name}"`);
        }
        await deps.settings.setRoutePaused(request.name, request.paused);
        return { name: request.name, paused: request.paused };
      }),

    updatePrice: (request, context) =>
      admin(context.requestHeader, async () => {
        const model = knownModel(request.price?.model ?? "");
        const previous = (await deps.settings.prices()).get(model.id);
        const text = request.price!;
        const prices: ModelPricesText = {
          per_image: text.perImage,
          per_second: text.perSecond,
          input_per_million_tokens: text.inputPerMillionTokens,
          output_per_million_tokens: text.outputPerMillionTokens,
          video_output_per_million_tokens: text.videoOutputPerMillionTokens,
        };
        checkPriceTexts(prices);
        const next = parseModelPrices(model, prices, previous);
        await deps.settings.setPrices(model.id, next);
        return { price: { model: model.id, ...priceMessage(formatModelPrices(next)) } };
      }),
  };
}

