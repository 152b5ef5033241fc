// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DomainError } from "../../src/domain/errors/domain-error.js";
import { formatMoney, parseMoney } from "../../src/domain/money.js";
import {
  checkBalanceAfterCredit, checkPriceTexts, MAX_BALANCE, MAX_CREDIT, MAX_OPENING_BALANCE, MAX_PRICE, parseAmountField, type AmountRule,
} from "../../src/domain/validation/amounts.js";

const CREDIT: AmountRule = { reason: "invalid_amount", allowZero: false, max: MAX_CREDIT };
const OPENING: AmountRule = { reason: "invalid_amount", allowZero: true, max: MAX_OPENING_BALANCE };
const FORMAT = /^amount must be a decimal string such as "10\.50": digits, optionally a point and 1 to 12 decimals; no spaces, sign, exponent or leading zeros$/;

function refusal(work: () => unknown): DomainError {
  try {
    work();
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    assert.equal(error.category, "invalid");
    return error;
  }
  assert.fail("expected a refusal");
}

describe("money: one strict decimal grammar", () => {
  it("when a decimal is written plainly, then it parses exactly, a sign allowed", () => {
    assert.equal(parseMoney("0"), 0n);
    assert.equal(parseMoney("0.5"), 500_000_000_000n);
    assert.equal(parseMoney("10"), 10_000_000_000_000n);
    assert.equal(parseMoney("-0.5"), -500_000_000_000n);
    assert.equal(parseMoney("100.000000000001"), 100_000_000_000_001n);
  });

  it("when a decimal has whitespace, a plus, an exponent, leading zeros or a bare point, then it is refused", () => {
    for (const bad of [" 5 ", "\t5\n", "5 ", " 5", "+5", "5e3", "1E2", "05", "00.5", "-05", "1.", ".5", "٥", "0x10", "Infinity", "5_000"]) {
      assert.throws(() => parseMoney(bad), /^Error: invalid amount .*expected a decimal number such as 10\.50 \(no spaces, "\+", exponent or leading zeros\)$/, JSON.stringify(bad));
    }
  });

  it("when an invalid amount is very long, then the message quotes only its first 40 characters", () => {
    const error = refusal(() => parseAmountField("amount", "x".repeat(100_000), CREDIT));
    assert.ok(error.message.length < 300);
    assert.throws(() => parseMoney(`${"7".repeat(40)}x`), (e: Error) => e.message.startsWith(`invalid amount "${"7".repeat(40)}…"`));
    assert.throws(() => parseMoney(`${"7".repeat(39)}x`), (e: Error) => e.message.startsWith(`invalid amount "${"7".repeat(39)}x":`));
  });
});

describe("money fields an operator sends", () => {
  it("when the bounds are read, then a credit and an opening balance are at most 1 000 000 000, a balance 10^12, a price 1 000 000", () => {
    assert.equal(formatMoney(MAX_CREDIT), "1000000000.00");
    assert.equal(MAX_OPENING_BALANCE, MAX_CREDIT);
    assert.equal(formatMoney(MAX_BALANCE), "1000000000000.00");
    assert.equal(formatMoney(MAX_PRICE), "1000000.00");
  });

  it("when an amount is a plain decimal within bounds, then it is accepted exactly", () => {
    assert.equal(parseAmountField("amount", "10", CREDIT), 10_000_000_000_000n);
    assert.equal(parseAmountField("amount", "0.000000000001", CREDIT), 1n);
    assert.equal(parseAmountField("amount", "1000000000", CREDIT), MAX_CREDIT);
    assert.equal(parseAmountField("amount", "1000000000.000000000000", CREDIT), MAX_CREDIT);
    assert.equal(parseAmountField("balance", "0", OPENING), 0n);
  });

  it("when an amount is one picodollar over its bound, then it is refused, the message naming the field and the bound", () => {
    for (const over of ["1000000000.000000000001", "1000000001", "9999999999", "10000000000", "1" + "0".repeat(30), "9".repeat(100_000)]) {
      const error = refusal(() => parseAmountField("amount", over, CREDIT));
      assert.equal(error.reason, "invalid_amount");
      assert.deepEqual(error.facts, { field: "amount", max: "1000000000.00" });
      assert.equal(error.message, "amount must be at most 1000000000.00");
    }
  });

  it("when an amount is not a strict decimal, then it is refused and the message names the field", () => {
    for (const bad of [" 5 ", "\t5\n", "+5", "5e3", "05", "00.5", "-1", "-0", "1.", ".5", "", "1,5", "1.0000000000001", "abc", "0" + "0".repeat(20) + "1", "01234567890.5"]) {
      const error = refusal(() => parseAmountField("amount", bad, CREDIT));
      assert.equal(error.reason, "invalid_amount", JSON.stringify(bad));
      assert.match(error.message, FORMAT, JSON.stringify(bad));
      assert.deepEqual(error.facts, { field: "amount", max: "1000000000.00" });
    }
  });

  it("when zero is not allowed, then zero in any spelling is refused; when it is, zero is accepted", () => {
    for (const zero of ["0", "0.0", "0.000000000000"]) {
      assert.equal(refusal(() => parseAmountField("amount", zero, CREDIT)).message, "amount must be more than zero");
      assert.equal(parseAmountField("balance", zero, OPENING), 0n);
    }
  });

  it("when the refusal's reason is given, then it is used (prices say invalid_price)", () => {
    const error = refusal(() => parseAmountField("per_image.1K", " 1", { reason: "invalid_price", allowZero: true, max: MAX_PRICE }));
    assert.equal(error.reason, "invalid_price");
    assert.match(error.message, /^per_image\.1K must be a decimal string/);
  });

  it("when a credit takes the balance exactly to the maximum, then it is allowed; one picodollar more, then refused", () => {
    assert.equal(checkBalanceAfterCredit(MAX_BALANCE - 10n, 10n), MAX_BALANCE);
    const error = refusal(() => checkBalanceAfterCredit(MAX_BALANCE - 10n, 11n));
    assert.equal(error.reason, "balance_limit_exceeded");
    assert.deepEqual(error.facts, { field: "amount", max: "1000000000000.00" });
    assert.equal(error.message, "amount would take the balance to 1000000000000.000000000001; a balance may be at most 1000000000000.00");
  });

  it("when a price update has a malformed or too large figure, then it is refused naming that figure", () => {
    const refusedField = (prices: Parameters<typeof checkPriceTexts>[0]) => {
      const error = refusal(() => checkPriceTexts(prices));
      assert.equal(error.reason, "invalid_price");
      return error.facts.field;
    };
    assert.equal(refusedField({ per_image: { "1K": "0.05", "2K": " 5 " } }), "per_image.2K");
    assert.equal(refusedField({ per_second: { "720p": "1e3" } }), "per_second.720p");
    assert.equal(refusedField({ input_per_million_tokens: "+1" }), "input_per_million_tokens");
    assert.equal(refusedField({ output_per_million_tokens: "1000000.000000000001" }), "output_per_million_tokens");
    assert.equal(refusedField({ video_output_per_million_tokens: "-2" }), "video_output_per_million_tokens");
    // Empty figures mean "unchanged"; zero and the bound itself are prices.
    checkPriceTexts({ per_image: { "1K": "0", "2K": "1000000" }, per_second: {}, input_per_million_tokens: "", output_per_million_tokens: "0.30" });
    checkPriceTexts({});
  });
});
