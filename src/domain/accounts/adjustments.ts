import { invalid } from "../errors/domain-error.js";
import type { Money } from "../money.js";
import { MAX_CREDIT, parseAmountField } from "../validation/amounts.js";

/** An adjustment's reason: 1 to 500 characters once trimmed (decision 0037). */
export const MAX_ADJUSTMENT_REASON_CHARACTERS = 500;

/**
 * An operator's adjustment as sent: a signed, non-zero decimal amount of at
 * most MAX_CREDIT either way (422 invalid_amount), and a reason of 1 to 500
 * characters once trimmed (422 invalid_reason). Returns the amount and the
 * trimmed reason.
 */
export function parseAdjustment(amountText: string, reasonText: string): { amount: Money; reason: string } {
  const negative = amountText.startsWith("-");
  const magnitude = parseAmountField("amount", negative ? amountText.slice(1) : amountText, {
    reason: "invalid_amount", allowZero: false, max: MAX_CREDIT,
  });
  const reason = reasonText.trim();
  let characters = 0;
  for (const _ of reason) if (++characters > MAX_ADJUSTMENT_REASON_CHARACTERS) break;
  if (characters === 0 || characters > MAX_ADJUSTMENT_REASON_CHARACTERS) {
    throw invalid("invalid_reason", `reason is required: 1 to ${MAX_ADJUSTMENT_REASON_CHARACTERS} characters once trimmed`, {
      field: "reason", limit: MAX_ADJUSTMENT_REASON_CHARACTERS,
    });
  }
  return { amount: negative ? -magnitude : magnitude, reason };
}
