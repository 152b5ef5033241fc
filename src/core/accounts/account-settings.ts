import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { invalid } from "../../domain/errors/domain-error.js";
import { formatMoney, type Money } from "../../domain/money.js";
import { MAX_BALANCE, parseAmountField } from "../../domain/validation/amounts.js";
import { checkTextLength, MAX_NAME_CHARACTERS } from "../../domain/validation/text-fields.js";
import type { AccountChange, AccountDetails, Ledger } from "../../ports/ledger.js";
import type { SettingsStore } from "../../ports/settings-store.js";
import { balanceView } from "../services/balance-view.js";
import { accountNotFound } from "./accounts.js";

/** What UpdateAccount may change (its update_mask's paths). */
const PATHS = ["name", "low_balance_threshold"] as const;

/** The fields an UpdateAccount names, checked: a name of 1 to 200 characters; a threshold of 0.01 up to the balance maximum, or "" for none. */
export function accountChange(paths: readonly string[], name: string, threshold: string): AccountChange {
  const unknown = paths.find((path) => !(PATHS as readonly string[]).includes(path));
  if (unknown !== undefined) throw invalid("invalid_update_mask", `update_mask may name ${PATHS.join(", ")} (got "${unknown}")`, { field: unknown });
  const change: { name?: string; lowBalanceThreshold?: Money | null } = {};
  if (paths.includes("name")) {
    checkTextLength("name", name, MAX_NAME_CHARACTERS);
    if (name.trim() === "") throw invalid("invalid_name", "name must not be empty", { field: "name" });
    change.name = name;
  }
  if (paths.includes("low_balance_threshold")) {
    change.lowBalanceThreshold = threshold === ""
      ? null
      : parseAmountField("low_balance_threshold", threshold, { reason: "invalid_amount", allowZero: false, max: MAX_BALANCE });
  }
  return change;
}

/** The low-balance fields of an answer. */
export const lowBalanceView = (account: AccountDetails) => ({
  ...(account.lowBalanceThreshold !== undefined && { lowBalanceThreshold: formatMoney(account.lowBalanceThreshold) }),
  lowBalance: account.lowBalance,
});

/** The operator's view of one account (AdminService.GetAccount): its listing, its low-balance setting and its webhook URL. */
export async function accountDetailsView(
  deps: { readonly ledger: Pick<Ledger, "account">; readonly settings: Pick<SettingsStore, "webhook"> }, accountId: string, known?: AccountDetails,
) {
  const account = known ?? (await deps.ledger.account(accountId));
  if (!account) throw accountNotFound(accountId);
  return {
    summary: {
      accountId, name: account.name, balance: balanceView(account), openJobs: account.openJobs, createdAt: timestampFromDate(account.createdAt), status: "active",
    },
    ...lowBalanceView(account),
    webhookUrl: (await deps.settings.webhook(accountId))?.url ?? "",
  };
}

/** Renames the account and/or sets its threshold (the owner's and the operator's UpdateAccount); 404 for an unknown account. */
export async function updateAccount(deps: { readonly ledger: Pick<Ledger, "updateAccount"> }, accountId: string, change: AccountChange): Promise<AccountDetails> {
  const account = await deps.ledger.updateAccount(accountId, change);
  if (!account) throw accountNotFound(accountId);
  return account;
}
