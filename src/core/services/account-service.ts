import { randomBytes } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { AccountService, SessionRole } from "../../../gen/generation/v1/account_service_pb.js";
import { credentialFingerprint, csrfTokenOf, issueSession, readSession, SESSION_LIFETIME_MS, type PresentedSession } from "../../domain/accounts/panel-session.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import type { ApiKeyRecord } from "../../ports/api-key-store.js";
import { accountKeys, checkGrants, issueCredential, keyNotFound, keyView, parseLimitsMessage, updateKeyLimits } from "../accounts/api-keys.js";
import { presentsAdminToken } from "../auth/admin-auth.js";
import { authenticateOwner, ownerOfSession, ownerOfToken, presentedSession, SESSION_HEADER, type Owner } from "../auth/owner-auth.js";
import { presentedKey } from "../auth/presented-key.js";
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
  const secret = deps.settingsOf.urlSigningSecret;

  /** Every call of the owner leaves once what it changed is on disk. */
  const owner = <T>(headers: Headers, work: (owner: Owner) => Promise<T>) =>
    rpc(async () => {
      const result = await work(await authenticateOwner(headers, deps));
      await deps.durability.flush();
      return result;
    });

  /** A key of the owner's account; another account's key, an owner token or an unknown id are all key_not_found. */
  async function ownKey({ accountId }: Owner, keyId: string): Promise<ApiKeyRecord> {
    const record = keyId === "" ? undefined : await deps.apiKeys.get(keyId);
    if (!record || record.accountId !== accountId || record.role === "owner") throw keyNotFound(keyId);
    return record;
  }

  function sessionAnswer(session: PresentedSession, token: string) {
    return {
      session: token,
      csrfToken: csrfTokenOf(secret, token),
      expireTime: timestampFromDate(session.expiresAt),
      role: session.role === "owner" ? SessionRole.OWNER : SessionRole.OPERATOR,
      accountId: session.accountId,
    };
  }

  return {
    startSession: async (_request, context) => {
      const headers = context.requestHeader;
      const now = deps.clock.now();
      const expiresAt = new Date(now.getTime() + SESSION_LIFETIME_MS);
      // A session presented here (without needing its CSRF token) is answered as it is: the panel reads its CSRF token so.
      const current = await presentedSession(headers, deps, { csrf: false });
      if (current) {
        if (current.role === "owner") await ownerOfSession(current, deps.apiKeys);
        return sessionAnswer(current, headers.get(SESSION_HEADER)!);
      }
      const adminToken = deps.settingsOf.adminToken;
      const operator = presentsAdminToken(headers, adminToken);
      const owner = operator ? undefined : await ownerOfToken(headers, deps.apiKeys);
      const session: PresentedSession = {
        id: randomBytes(12).toString("base64url"),
        role: owner ? "owner" : "operator",
        accountId: owner?.accountId ?? "",
        credentialId: owner?.credentialId ?? "",
        expiresAt,
      };
      // The record is the session: what sign-out, the operator and a revoked owner token end.
      await deps.panelSessions.create({
        sessionId: session.id,
        role: session.role,
        accountId: session.accountId,
        credentialId: session.credentialId,
        credentialFingerprint: credentialFingerprint(secret, operator ? adminToken : presentedKey(headers)!),
        createdAt: now,
        expiresAt,
      });
      await deps.durability.flush();
      return sessionAnswer(session, issueSession(secret, session, session.id));
    },

    endSession: async (_request, context) => {
      const token = context.requestHeader.get(SESSION_HEADER);
      if (token === null) throw new DomainError("unauthenticated", "missing_credential", "EndSession needs the session in x-panel-session");
      // Signed by us is enough: ending a session needs no CSRF token and harms only its holder; an expired one has nothing left to end.
      let session: PresentedSession;
      try {
        session = readSession(secret, token, deps.clock.now());
      } catch (error) {
        if (error instanceof DomainError && error.reason === "session_expired") return {};
        throw error;
      }
      await deps.panelSessions.revoke(session.id, deps.clock.now());
      await deps.durability.flush();
      return {};
    },

    getAccount: (_request, context) =>
      owner(context.requestHeader, async ({ accountId }) => {
        const snapshot = await deps.ledger.balance(accountId);
        if (!snapshot) throw new DomainError("not_found", "account_not_found", `no account ${accountId}`);
        return { accountId, balance: balanceView(snapshot) };
      }),

    listApiKeys: (_request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({ keys: await accountKeys(deps, accountId) })),

    createAccountApiKey: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => {
        checkGrants(request.models);
        const { record, secret: apiKey } = await issueCredential(deps, accountId, "key", request.models, parseLimitsMessage(request.limits));
        return { key: await keyView(deps, record), apiKey };
      }),

    updateAccountApiKey: (request, context) =>
      owner(context.requestHeader, async (who) => {
        const record = await updateKeyLimits(deps, await ownKey(who, request.keyId), request.limits, request.updateMask);
        return { key: await keyView(deps, record) };
      }),

    revokeAccountApiKey: (request, context) =>
      owner(context.requestHeader, async (who) => {
        const record = await ownKey(who, request.keyId);
        if (!(await deps.apiKeys.revoke(record.keyId))) throw keyNotFound(record.keyId);
        return { key: await keyView(deps, { ...record, revoked: true }) };
      }),

    getAccountWebhook: (_request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({ webhook: await accountWebhook(deps, accountId) })),

    setAccountWebhook: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({ webhook: await setWebhookUrl(deps, accountId, request.url) })),

    rotateWebhookSecret: (_request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({ webhook: await rotateWebhookSecret(deps, accountId) })),

    sendTestWebhook: (_request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({ delivery: deliveryMessage(await sendTestEvent(deps, accountId)) })),

    listWebhookDeliveries: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({
        deliveries: (await deps.deliveries.listByAccount(accountId, deliveryLimit(request.limit))).map(deliveryMessage),
      })),

    redeliverWebhook: (request, context) =>
      owner(context.requestHeader, async ({ accountId }) => ({ delivery: deliveryMessage(await redeliver(deps, request.messageId, accountId)) })),
  };
}
