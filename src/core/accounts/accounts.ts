import { randomUUID } from "node:crypto";
import { DomainError } from "../../domain/errors/domain-error.js";
import { checkBalanceAfterCredit, MAX_CREDIT, MAX_OPENING_BALANCE, parseAmountField } from "../../domain/validation/amounts.js";
import { checkTextLength, MAX_NAME_CHARACTERS } from "../../domain/validation/text-fields.js";
import type { BalanceSnapshot, Ledger } from "../../ports/ledger.js";
import type { SettingsStore } from "../../ports/settings-store.js";
import { balanceView } from "../services/balance-view.js";
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

/** Credits the account; its balance stays within the maximum (422). */
export async function addCredits(ledger: Pick<Ledger, "credit" | "balance">, accountId: string, amountText: string) {
  const credit = amount("amount", amountText, { allowZero: false, max: MAX_CREDIT });
  // Checked before the credit, not in the same step: concurrent credits may pass the maximum by at most one credit.
  checkBalanceAfterCredit((await existingBalance(ledger, accountId)).balance, credit);
  const snapshot = await ledger.credit(accountId, credit);
  if (!snapshot) throw accountNotFound(accountId);
  return balanceView(snapshot);
}
