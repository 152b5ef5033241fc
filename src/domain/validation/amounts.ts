import { invalid } from "../errors/domain-error.js";
import { formatMoney, InvalidAmountError, MONEY_SCALE_DIGITS, parseMoney, type Money } from "../money.js";
import type { ModelPricesText } from "../pricing/price-table.js";

const USD = (units: bigint): Money => units * 10n ** BigInt(MONEY_SCALE_DIGITS);

/** The most one credit (AddCredits `amount`) may add: 1 000 000 000.00. */
export const MAX_CREDIT: Money = USD(1_000_000_000n);
/** The most an account may open with (CreateAccount `balance`): the same as one credit. */
export const MAX_OPENING_BALANCE: Money = MAX_CREDIT;
/** A credit may not take a balance above this: 1 000 000 000 000.00. */
export const MAX_BALANCE: Money = USD(1_000_000_000_000n);
/** The most any one price (per image, per second, per 1M tokens) may be: 1 000 000.00. */
export const MAX_PRICE: Money = USD(1_000_000n);

export interface AmountRule {
  /** The refusal's reason: "invalid_amount" for balances and credits, "invalid_price" for prices. */
  readonly reason: string;
  readonly allowZero: boolean;
  /** Inclusive. */
  readonly max: Money;
}

const FORMAT = `a decimal string such as "10.50": digits, optionally a point and 1 to ${MONEY_SCALE_DIGITS} decimals; no spaces, sign, exponent or leading zeros`;

/**
 * A money field an operator sends (account balance, credit, price), checked
 * strictly: the grammar of parseMoney without a sign, at most the ledger's 12
 * decimals, more than zero unless zero is allowed, and at most `max`. Every
 * message starts with the field's name.
 */
export function parseAmountField(field: string, value: string, rule: AmountRule): Money {
  const refuse = (what: string) => invalid(rule.reason, `${field} must be ${what}`, { field, max: formatMoney(rule.max) });
  // More whole digits than the bound has: too large, refused before any BigInt is made of a million digits.
  const point = value.indexOf(".");
  const whole = point < 0 ? value : value.slice(0, point);
  if (whole.length > formatMoney(rule.max).indexOf(".") && /^[1-9][0-9]*$/.test(whole)) throw refuse(`at most ${formatMoney(rule.max)}`);
  if (value.startsWith("-")) throw refuse(FORMAT);
  let amount: Money;
  try {
    amount = parseMoney(value);
  } catch (error) {
    if (error instanceof InvalidAmountError) throw refuse(FORMAT);
    throw error;
  }
  if (amount === 0n && !rule.allowZero) throw refuse("more than zero");
  if (amount > rule.max) throw refuse(`at most ${formatMoney(rule.max)}`);
  return amount;
}

/** The balance a credit would leave may not pass MAX_BALANCE. */
export function checkBalanceAfterCredit(balance: Money, credit: Money, field = "amount"): Money {
  const after = balance + credit;
  if (after > MAX_BALANCE) {
    throw invalid("balance_limit_exceeded", `${field} would take the balance to ${formatMoney(after)}; a balance may be at most ${formatMoney(MAX_BALANCE)}`, {
      field, max: formatMoney(MAX_BALANCE),
    });
  }
  return after;
}

const PRICE_RULE: AmountRule = { reason: "invalid_price", allowZero: true, max: MAX_PRICE };

/**
 * Every figure of a price update, strictly (see parseAmountField), each named
 * by its field ("per_image.1K", "input_per_million_tokens"). Empty fields are
 * left to mean "unchanged"; the per-kind rules (resolutions, 6 decimals per
 * 1M tokens) stay with parseModelPrices.
 */
export function checkPriceTexts(prices: ModelPricesText): void {
  for (const keyed of ["per_image", "per_second"] as const) {
    for (const [key, value] of Object.entries(prices[keyed] ?? {})) parseAmountField(`${keyed}.${key}`, value, PRICE_RULE);
  }
  for (const single of ["input_per_million_tokens", "output_per_million_tokens", "video_output_per_million_tokens"] as const) {
    const value = prices[single];
    if (value !== undefined && value !== "") parseAmountField(single, value, PRICE_RULE);
  }
}
