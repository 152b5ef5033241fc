/**
 * Money is a bigint count of picodollars (10^-12 USD).
 *
 * Why 12 digits: text is priced per 1M tokens, so the price of one token of a
 * model priced with six decimals per 1M (e.g. $0.037500 / 1M) is exact at
 * 10^-12. Every charge is therefore an exact integer: no rounding, no float.
 */
export type Money = bigint;

export const MONEY_SCALE_DIGITS = 12;
const SCALE = 10n ** BigInt(MONEY_SCALE_DIGITS);
/**
 * The one decimal grammar of money: an optional "-", then "0" or digits not
 * starting with 0, then an optional point with at least one digit. No
 * whitespace, "+", exponent or leading zeros ("05", "00.5").
 */
const DECIMAL = /^(-)?(0|[1-9][0-9]*)(?:\.([0-9]+))?$/;

export const ZERO: Money = 0n;

export class InvalidAmountError extends Error {
  constructor(readonly input: string, reason: string) {
    // The input is quoted, cut after 40 characters: an error message never carries a megabyte of digits.
    super(`invalid amount ${JSON.stringify(input.length > 40 ? `${input.slice(0, 40)}…` : input)}: ${reason}`);
  }
}

/** Parses a decimal USD string ("10", "10.50", "0.000001"), exactly as written: nothing is trimmed. */
export function parseMoney(input: string): Money {
  const match = DECIMAL.exec(input);
  if (!match) {
    throw new InvalidAmountError(input, "expected a decimal number such as 10.50 (no spaces, \"+\", exponent or leading zeros)");
  }
  const [, sign, whole, fraction = ""] = match;
  if (fraction.length > MONEY_SCALE_DIGITS) {
    throw new InvalidAmountError(input, `at most ${MONEY_SCALE_DIGITS} decimal places`);
  }
  const units = BigInt(whole!) * SCALE + BigInt(fraction.padEnd(MONEY_SCALE_DIGITS, "0"));
  return sign ? -units : units;
}

/** Formats with at least two decimals and no trailing zeros beyond them: "10.00", "0.0000375". */
export function formatMoney(amount: Money): string {
  const negative = amount < 0n;
  const abs = negative ? -amount : amount;
  const whole = abs / SCALE;
  let fraction = (abs % SCALE).toString().padStart(MONEY_SCALE_DIGITS, "0").replace(/0+$/, "");
  if (fraction.length < 2) fraction = fraction.padEnd(2, "0");
  return `${negative ? "-" : ""}${whole}.${fraction}`;
}

/** price per 1M units × quantity, exact (prices carry at most 6 decimals per 1M). */
export function perMillion(pricePerMillion: Money, quantity: number | bigint): Money {
  return (pricePerMillion * BigInt(quantity)) / 1_000_000n;
}

export function times(price: Money, quantity: number | bigint): Money {
  return price * BigInt(quantity);
}
