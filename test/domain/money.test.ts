// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { formatMoney, parseMoney, perMillion } from "../../src/domain/money.js";

describe("money", () => {
  it("parses decimal strings into exact picodollars", () => {
    assert.equal(parseMoney("10"), 10_000_000_000_000n);
    assert.equal(parseMoney("0.039"), 39_000_000_000n);
    assert.equal(parseMoney("0.000000000001"), 1n);
    assert.equal(parseMoney("-1.5"), -1_500_000_000_000n);
  });

  it("refuses anything that is not a plain decimal or has more than 12 decimals", () => {
    for (const bad of ["", "abc", "1e3", "1.2.3", "0.0000000000001", "NaN", "1,5"]) {
      assert.throws(() => parseMoney(bad), /invalid amount/, bad);
    }
  });

  it("formats with two decimals at least and no trailing zeros beyond", () => {
    assert.equal(formatMoney(parseMoney("10")), "10.00");
    assert.equal(formatMoney(parseMoney("9.866")), "9.866");
    assert.equal(formatMoney(parseMoney("0.0000375")), "0.0000375");
    assert.equal(formatMoney(parseMoney("-0.5")), "-0.50");
    assert.equal(formatMoney(0n), "0.00");
  });

  it("prices per million tokens exactly, where a float would drift", () => {
    // 0.30 per 1M × 7 tokens = 0.0000021 exactly
    assert.equal(formatMoney(perMillion(parseMoney("0.30"), 7)), "0.0000021");
    // ten thousand single-token charges sum to exactly one 10k-token charge
    let sum = 0n;
    for (let i = 0; i < 10_000; i++) sum += perMillion(parseMoney("0.0375"), 1);
    assert.equal(sum, perMillion(parseMoney("0.0375"), 10_000));
    assert.equal(formatMoney(sum), "0.000375");
  });
});
