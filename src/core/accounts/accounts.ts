import { randomUUID } from "node:crypto";
import { DomainError } from "../../domain/errors/domain-error.js";
import { checkBalanceAfterCredit, MAX_CREDIT, MAX_OPENING_BALANCE, parseAmountField } from "../../domain/validation/amounts.js";
import { checkTextLength, MAX_NAME_CHARACTERS } from "../../domain/validation/text-fields.js";
import type { BalanceSnapshot, Ledger } from "../../ports/ledger.js";
import type { SettingsStore } from "../../ports/settings-store.js";
import { balanceView } from "../services/balance-view.js";
import type { Audit } from "../audit/audit-trail.js";
import { formatMoney } from "../../domain/money.js";
import { newWebhookSecret } from "../webhooks/webhook-requests.js";

/** Accounts and their money as the operator opens and credits them (AdminService); an owner reads the same balance. */
export const accountNotFound = (accountId: string) => new DomainError("not_found", "account_not_found", `no account ${accountId}`);

/** Money an operator sends: strict decimal, bounded; a refusal names the field (422 invalid_amount). */
const amount = (field: string, value: string, { allowZero, max }: { allowZero: boolean; max: bigint }): bigint =>
  parseAmountField(field, value, { reason: "invalid_amount", allowZero, max });

/** The account's balance; an unknown account is account_not_found. */
export async function existingBalance(ledger: Pick<Ledger, "balance">, accountId: string): Promise<BalanceSnapshot> {
  const snapshot = await ledger.balance(accountId);
  if (!snapshot) throw accountNotFound(accountId);
  return snapshot;
}

/** A new account with its opening balance (none when `balance` is empty) and a webhook secret of its own. */
export async function openAccount(
  deps: { readonly ledger: Pick<Ledger, "createAccount" | "balance">; readonly settings: Pick<SettingsStore, "setWebhook"> },
  name: string, balance: string,
) {
  checkTextLength("name", name, MAX_NAME_CHARACTERS);
  const initial = balance === "" ? 0n : amount("balance", balance, { allowZero: true, max: MAX_OPENING_BALANCE });
  const accountId = `acct_${randomUUID().replaceAll("-", "")}`;
  await deps.ledger.createAccount(accountId, name, initial);
  await deps.settings.setWebhook(accountId, { url: "", secret: newWebhookSecret() });
  return { accountId, name, balance: balanceView(await existingBalance(deps.ledger, accountId)) };
}

/** The longest reason a credit (or an adjustment) may carry into the audit trail. */
export const MAX_REASON_CHARACTERS = 500;

/**
 * The audit trail's record of a change of the balance (credit.added; an adjustment's too): the balance read before and
 * the one it makes, the amount and the reason. `before` is the balance read just before the change (decision 0034).
 */
export function balanceChange(accountId: string, before: bigint, change: bigint, reason: string) {
  return {
    accountId, subject: accountId,
    before: { balance: formatMoney(before) },
    after: { balance: formatMoney(before + change), amount: formatMoney(change), ...(reason === "" ? {} : { reason }) },
  };
}

/** How a money request is tied to its Idempotency-Key (keyed-money.ts): the ledger's operation id, and whether the key was finished. */
export interface Once {
  readonly operationId?: string;
  /** The key's request was answered before: its entry exists, so the maximum is not judged again on today's balance. */
  readonly replay?: boolean;
}

/**
 * Credits the account; its balance stays within the maximum (422). The audit trail records it with its reason. With
 * an operation id the ledger credits once (decision 0039): a repeat answers the balance its entry recorded, `replayed`.
 */
export async function addCredits(
  ledger: Pick<Ledger, "credit" | "balance">, accountId: string, amountText: string, reason = "", audit?: Audit, once: Once = {},
) {
  const credit = amount("amount", amountText, { allowZero: false, max: MAX_CREDIT });
  checkTextLength("reason", reason, MAX_REASON_CHARACTERS);
  // Checked before the credit, not in the same step: concurrent credits may pass the maximum by at most one credit.
  const before = (await existingBalance(ledger, accountId)).balance;
  if (!once.replay) checkBalanceAfterCredit(before, credit);
  const credited = await ledger.credit(accountId, credit, audit?.("credit.added", balanceChange(accountId, before, credit, reason)), once.operationId);
  if (!credited) throw accountNotFound(accountId);
  return { balance: balanceView(credited), replayed: credited.repeated === true };
}
