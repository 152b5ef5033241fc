import { parseAdjustment } from "../../domain/accounts/adjustments.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import { formatMoney } from "../../domain/money.js";
import { checkBalanceAfterCredit } from "../../domain/validation/amounts.js";
import type { Ledger } from "../../ports/ledger.js";
import { entryView } from "../money/statement.js";
import { balanceView } from "../services/balance-view.js";
import type { Audit } from "../audit/audit-trail.js";
import { accountNotFound, balanceChange, existingBalance, type Once } from "./accounts.js";

/**
 * An operator's adjustment (AdminService.AdjustBalance, decision 0037): a
 * signed amount with its reason, written by the ledger in one atomic step
 * with its `adjustment` entry. A debit beyond the available balance is 409
 * insufficient_funds and moves nothing; a credit keeps the balance within its
 * maximum (checked before, as AddCredits does).
 */
export async function adjustBalance(
  ledger: Pick<Ledger, "adjust" | "balance">, accountId: string, amountText: string, reasonText: string, audit?: Audit, once: Once = {},
) {
  const { amount, reason } = parseAdjustment(amountText, reasonText);
  const before = await existingBalance(ledger, accountId);
  if (amount > 0n && !once.replay) checkBalanceAfterCredit(before.balance, amount);
  const change = balanceChange(accountId, before.balance, amount, reason);
  // With an operation id the ledger adjusts once (decision 0039): a repeat answers the entry made then, `replayed`.
  const outcome = await ledger.adjust(accountId, amount, reason, audit?.("balance.adjusted", change), once.operationId);
  if (outcome === "unknown_account") throw accountNotFound(accountId);
  if (outcome === "insufficient_funds") {
    throw new DomainError("conflict", "insufficient_funds", "the available balance does not cover this debit; nothing was moved", {
      required: formatMoney(-amount),
    });
  }
  return { balance: balanceView(outcome.snapshot), entry: entryView(outcome.entry), replayed: outcome.repeated === true };
}
