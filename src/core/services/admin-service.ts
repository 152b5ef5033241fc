import { randomBytes, randomUUID } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { AdminService } from "../../../gen/generation/v1/admin_service_pb.js";
import { ALL_MODELS_GRANT } from "../../domain/accounts/grants.js";
import { findModel, MODELS } from "../../domain/catalog/models.js";
import { badRequest, DomainError, invalid } from "../../domain/errors/domain-error.js";
import { changeKeyLimits, keyStanding, parseKeyLimits, type KeyLimits, type KeyLimitsInput } from "../../domain/accounts/key-limits.js";
import { formatMoney } from "../../domain/money.js";
import type { ApiKeyRecord } from "../../ports/api-key-store.js";
import type { KeyLimits as KeyLimitsMessage } from "../../../gen/generation/v1/admin_service_pb.js";
import { formatModelPrices, parseModelPrices, type ModelPricesText } from "../../domain/pricing/price-table.js";
import {
  checkBalanceAfterCredit, checkPriceTexts, MAX_CREDIT, MAX_OPENING_BALANCE, parseAmountField,
} from "../../domain/validation/amounts.js";
import { isHttpUrl } from "../../domain/validation/urls.js";
import { requireAdmin } from "../auth/admin-auth.js";
import { hashSecret } from "../auth/api-key-auth.js";
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

/** Standard Webhooks symmetric secret: 32 random bytes, base64, "whsec_" prefix. */
const newWebhookSecret = () => `whsec_${randomBytes(32).toString("base64")}`;

export function createAdminService(deps: CoreDeps): ServiceImpl<typeof AdminService> {
  /** Every admin answer leaves once what it changed (accounts, money, keys, settings) is on disk. */
  const admin = <T>(headers: Headers, work: () => Promise<T>) =>
    rpc(async () => {
      requireAdmin(headers, deps.settingsOf.adminToken);
      const result = await work();
      await deps.durability.flush();
      return result;
    });

  async function existingKey(keyId: string): Promise<ApiKeyRecord> {
    const record = keyId === "" ? undefined : await deps.apiKeys.get(keyId);
    if (!record) throw new DomainError("not_found", "key_not_found", `no key ${keyId}`);
    return record;
  }

  /** The key with its standing: spent by period, held, and what each spend limit leaves. */
  async function keyView(record: ApiKeyRecord) {
    const limits = record.limits ?? {};
    const { spending, held } = await deps.ledger.keyAccount(record.accountId, record.keyId);
    const standing = keyStanding(limits, spending, held, deps.clock.now());
    const text = (amount: bigint | undefined) => (amount === undefined ? undefined : formatMoney(amount));
    return {
      keyId: record.keyId, accountId: record.accountId, models: [...record.models], revoked: record.revoked,
      createdAt: timestampFromDate(record.createdAt), limits: limitsMessage(limits),
      spent: formatMoney(standing.spent), spentToday: formatMoney(standing.spentToday), spentThisMonth: formatMoney(standing.spentThisMonth),
      held: formatMoney(standing.held), remaining: text(standing.remaining), remainingToday: text(standing.remainingToday),
      remainingThisMonth: text(standing.remainingThisMonth),
    };
  }

  async function existingBalance(accountId: string) {
    const snapshot = await deps.ledger.balance(accountId);
    if (!snapshot) throw new DomainError("not_found", "account_not_found", `no account ${accountId}`);
    return snapshot;
  }

  return {
    createAccount: (request, context) =>
      admin(context.requestHeader, async () => {
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
        if (request.models.length === 0) throw invalid("invalid_grants", "models must name at least one model or \"*\"", { field: "models" });
        for (const model of request.models) {
          if (model !== ALL_MODELS_GRANT && findModel(model)?.id !== model) {
            throw invalid("invalid_grants", `unknown model "${model}" in models`, { field: "models" });
          }
        }
        const limits = parseKeyLimits(limitsInput(request.limits));
        const keyId = `key_${randomUUID().replaceAll("-", "")}`;
        const apiKey = `gsk_${randomBytes(32).toString("base64url")}`;
        await deps.apiKeys.create({
          keyId, accountId: request.accountId, secretHash: hashSecret(apiKey), models: [...request.models],
          revoked: false, createdAt: deps.clock.now(), limits,
        });
        return { keyId, apiKey, models: request.models, accountId: request.accountId, limits: limitsMessage(limits) };
      }),

    getApiKey: (request, context) =>
      admin(context.requestHeader, async () => ({ key: await keyView(await existingKey(request.keyId)) })),

    updateApiKey: (request, context) =>
      admin(context.requestHeader, async () => {
        const record = await existingKey(request.keyId);
        const mentioned = new Set<keyof KeyLimits>();
        for (const path of request.updateMask?.paths ?? []) {
          const field = LIMIT_FIELDS[path];
          if (!field) throw badRequest("invalid_key_limit", `update_mask names "${path}", which is not a key limit (${Object.keys(LIMIT_FIELDS).join(", ")})`, { field: "update_mask" });
          mentioned.add(field);
        }
        const limits = changeKeyLimits(record.limits ?? {}, limitsInput(request.limits), mentioned);
        if (!(await deps.apiKeys.setLimits(record.keyId, limits))) throw new DomainError("not_found", "key_not_found", `no key ${request.keyId}`);
        return { key: await keyView({ ...record, limits }) };
      }),

    revokeApiKey: (request, context) =>
      admin(context.requestHeader, async () => {
        if (!(await deps.apiKeys.revoke(request.keyId))) throw new DomainError("not_found", "key_not_found", `no key ${request.keyId}`);
        return { keyId: request.keyId, revoked: true };
      }),

    setWebhook: (request, context) =>
      admin(context.requestHeader, async () => {
        await existingBalance(request.accountId);
        if (request.url !== "" && !isHttpUrl(request.url)) throw invalid("invalid_url", "url must be an http:// or https:// URL", { field: "url" });
        const secret = (await deps.settings.webhook(request.accountId))?.secret ?? newWebhookSecret();
        await deps.settings.setWebhook(request.accountId, { url: request.url, secret });
        return { url: request.url, secret };
      }),

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

/** update_mask paths (KeyLimits fields) → the domain's names. */
const LIMIT_FIELDS: Record<string, keyof KeyLimits> = {
  spend_limit: "spendLimit",
  daily_spend_limit: "dailySpendLimit",
  monthly_spend_limit: "monthlySpendLimit",
  rate_limit_per_minute: "ratePerMinute",
  max_concurrent_jobs: "maxConcurrentJobs",
};

function limitsInput(message: KeyLimitsMessage | undefined): KeyLimitsInput {
  return {
    spendLimit: message?.spendLimit, dailySpendLimit: message?.dailySpendLimit, monthlySpendLimit: message?.monthlySpendLimit,
    ratePerMinute: message?.rateLimitPerMinute, maxConcurrentJobs: message?.maxConcurrentJobs,
  };
}

function limitsMessage(limits: KeyLimits) {
  const text = (amount: bigint | undefined) => (amount === undefined ? undefined : formatMoney(amount));
  return {
    spendLimit: text(limits.spendLimit), dailySpendLimit: text(limits.dailySpendLimit), monthlySpendLimit: text(limits.monthlySpendLimit),
    rateLimitPerMinute: limits.ratePerMinute, maxConcurrentJobs: limits.maxConcurrentJobs,
  };
}
