// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  admissionNeedsHolds, changeKeyLimits, countCharge, countReservation, keyAdmission, keyStanding, MAX_CONCURRENT_JOBS, MAX_RATE_PER_MINUTE, NO_SPENDING,
  parseKeyLimits, replayAdmission, spentThisMonth, spentToday, type KeySpending,
} from "../../src/domain/accounts/key-limits.js";
import { DomainError } from "../../src/domain/errors/domain-error.js";

const NOW = new Date("2026-11-23T10:00:15.000Z");
const NO_HOLDS = { held: 0n, openJobs: 0 };

describe("key limits: admission", () => {
  it("when a key has no limits, then every reservation is admitted", () => {
    assert.equal(keyAdmission({}, NO_SPENDING, { held: 10n ** 20n, openJobs: 10 ** 6 }, 10n ** 20n, true, NOW), undefined);
  });

  it("when the total spend limit would be passed by spent + held + the amount, then it is refused; exactly reaching it is admitted", () => {
    const spending = { ...NO_SPENDING, total: 60n };
    const limits = { spendLimit: 100n };
    assert.equal(keyAdmission(limits, spending, { held: 30n, openJobs: 0 }, 10n, true, NOW), undefined);
    assert.deepEqual(keyAdmission(limits, spending, { held: 30n, openJobs: 0 }, 11n, true, NOW), { kind: "spend", limit: "spend_limit" });
    assert.deepEqual(keyAdmission(limits, spending, { held: 31n, openJobs: 0 }, 10n, false, NOW), { kind: "spend", limit: "spend_limit" });
  });

  it("when the daily or monthly limit would be passed, then it is refused naming it; spend of an earlier day or month does not count", () => {
    const spending: KeySpending = { ...NO_SPENDING, total: 500n, day: "2026-11-23", dayTotal: 40n, month: "2026-11", monthTotal: 90n };
    assert.deepEqual(keyAdmission({ dailySpendLimit: 50n }, spending, NO_HOLDS, 11n, true, NOW), { kind: "spend", limit: "daily_spend_limit" });
    assert.equal(keyAdmission({ dailySpendLimit: 50n }, spending, NO_HOLDS, 10n, true, NOW), undefined);
    assert.deepEqual(keyAdmission({ monthlySpendLimit: 100n }, spending, NO_HOLDS, 11n, true, NOW), { kind: "spend", limit: "monthly_spend_limit" });
    assert.equal(keyAdmission({ monthlySpendLimit: 100n }, spending, NO_HOLDS, 10n, true, NOW), undefined);
    const yesterday: KeySpending = { ...spending, day: "2026-11-22", month: "2026-10" };
    assert.equal(keyAdmission({ dailySpendLimit: 50n, monthlySpendLimit: 50n }, yesterday, NO_HOLDS, 50n, true, NOW), undefined);
    assert.deepEqual(keyAdmission({ dailySpendLimit: 50n }, yesterday, { held: 1n, openJobs: 0 }, 50n, true, NOW), { kind: "spend", limit: "daily_spend_limit" });
  });

  it("when several limits are passed, then the total is named first, then the day, then the month", () => {
    const spending: KeySpending = { ...NO_SPENDING, total: 100n, day: "2026-11-23", dayTotal: 100n, month: "2026-11", monthTotal: 100n };
    const all = { spendLimit: 100n, dailySpendLimit: 100n, monthlySpendLimit: 100n };
    assert.deepEqual(keyAdmission(all, spending, NO_HOLDS, 1n, true, NOW), { kind: "spend", limit: "spend_limit" });
    assert.deepEqual(keyAdmission({ ...all, spendLimit: 1000n }, spending, NO_HOLDS, 1n, true, NOW), { kind: "spend", limit: "daily_spend_limit" });
    assert.deepEqual(keyAdmission({ ...all, spendLimit: 1000n, dailySpendLimit: 1000n }, spending, NO_HOLDS, 1n, true, NOW), { kind: "spend", limit: "monthly_spend_limit" });
  });

  it("when a key has used its requests of this minute, then it is refused until the minute ends; last minute's count does not carry", () => {
    const minute = Math.floor(NOW.getTime() / 60_000);
    const spending = { ...NO_SPENDING, minute, requests: 3 };
    assert.deepEqual(keyAdmission({ ratePerMinute: 3 }, spending, NO_HOLDS, 0n, false, NOW), { kind: "rate", retryAfterSeconds: 45 });
    assert.equal(keyAdmission({ ratePerMinute: 4 }, spending, NO_HOLDS, 0n, false, NOW), undefined);
    assert.equal(keyAdmission({ ratePerMinute: 3 }, { ...spending, minute: minute - 1 }, NO_HOLDS, 0n, false, NOW), undefined);
    const late = new Date(Math.floor(NOW.getTime() / 60_000) * 60_000 + 59_999);
    assert.deepEqual(keyAdmission({ ratePerMinute: 3 }, spending, NO_HOLDS, 0n, false, late), { kind: "rate", retryAfterSeconds: 1 });
    const start = new Date(minute * 60_000);
    assert.deepEqual(keyAdmission({ ratePerMinute: 3 }, spending, NO_HOLDS, 0n, false, start), { kind: "rate", retryAfterSeconds: 60 });
  });

  it("when a key has as many open jobs as allowed, then another job is refused, a text call is not", () => {
    assert.deepEqual(keyAdmission({ maxConcurrentJobs: 2 }, NO_SPENDING, { held: 0n, openJobs: 2 }, 1n, true, NOW), { kind: "concurrency" });
    assert.equal(keyAdmission({ maxConcurrentJobs: 2 }, NO_SPENDING, { held: 0n, openJobs: 2 }, 1n, false, NOW), undefined);
    assert.equal(keyAdmission({ maxConcurrentJobs: 2 }, NO_SPENDING, { held: 0n, openJobs: 1 }, 1n, true, NOW), undefined);
  });

  it("when the rate, the concurrency and the spend are all exceeded, then the rate is named first, then the concurrency", () => {
    const minute = Math.floor(NOW.getTime() / 60_000);
    const spending = { ...NO_SPENDING, total: 10n, minute, requests: 1 };
    const limits = { ratePerMinute: 1, maxConcurrentJobs: 1, spendLimit: 1n };
    assert.equal(keyAdmission(limits, spending, { held: 0n, openJobs: 1 }, 1n, true, NOW)?.kind, "rate");
    assert.equal(keyAdmission({ ...limits, ratePerMinute: 5 }, spending, { held: 0n, openJobs: 1 }, 1n, true, NOW)?.kind, "concurrency");
  });
});

describe("key limits: what admission reads", () => {
  it("when a key has a job limit or any spend limit, then admission needs its open holds; with none or only a rate limit, it does not", () => {
    assert.equal(admissionNeedsHolds({}), false);
    assert.equal(admissionNeedsHolds({ ratePerMinute: 5 }), false);
    for (const limits of [{ maxConcurrentJobs: 1 }, { spendLimit: 1n }, { dailySpendLimit: 1n }, { monthlySpendLimit: 1n }]) {
      assert.equal(admissionNeedsHolds(limits), true, JSON.stringify(limits, (_, v) => (typeof v === "bigint" ? String(v) : v)));
    }
  });

  it("when admission does not need the holds, then any holds give the same answer as none (the ledger may skip counting them)", () => {
    const heavy = { held: 10n ** 20n, openJobs: 10 ** 6 };
    for (const limits of [{}, { ratePerMinute: 1 }]) {
      assert.deepEqual(keyAdmission(limits, NO_SPENDING, heavy, 5n, true, NOW), keyAdmission(limits, NO_SPENDING, NO_HOLDS, 5n, true, NOW));
    }
  });
});

describe("key limits: counting", () => {
  it("when reservations are counted, then they add up within a minute and start again at one in the next", () => {
    const first = countReservation(NO_SPENDING, NOW);
    assert.deepEqual([first.minute, first.requests], [Math.floor(NOW.getTime() / 60_000), 1]);
    const second = countReservation(first, new Date(NOW.getTime() + 1000));
    assert.equal(second.requests, 2);
    const next = countReservation(second, new Date(NOW.getTime() + 60_000));
    assert.deepEqual([next.minute, next.requests], [first.minute + 1, 1]);
    assert.equal(next.total, 0n, "money is untouched");
  });

  it("when charges are counted, then the total grows and the day and month totals restart with a new day or month", () => {
    const a = countCharge(NO_SPENDING, 5n, NOW);
    assert.deepEqual([a.total, a.day, a.dayTotal, a.month, a.monthTotal], [5n, "2026-11-23", 5n, "2026-11", 5n]);
    const b = countCharge(a, 7n, new Date("2026-11-23T23:59:59.999Z"));
    assert.deepEqual([b.total, b.dayTotal, b.monthTotal], [12n, 12n, 12n]);
    const c = countCharge(b, 1n, new Date("2026-11-24T00:00:00.000Z"));
    assert.deepEqual([c.total, c.day, c.dayTotal, c.monthTotal], [13n, "2026-11-24", 1n, 13n]);
    const d = countCharge(c, 2n, new Date("2026-12-01T00:00:00.000Z"));
    assert.deepEqual([d.total, d.month, d.monthTotal, d.dayTotal], [15n, "2026-12", 2n, 2n]);
    assert.equal(spentToday(d, new Date("2026-12-02T00:00:00Z")), 0n);
    assert.equal(spentThisMonth(d, new Date("2027-01-01T00:00:00Z")), 0n);
    assert.equal(d.requests, 0, "the rate window is untouched");
  });

  it("when a key's standing is read, then it shows spent by period, held, and what each limit leaves, never below zero", () => {
    const spending = countCharge(NO_SPENDING, 30n, NOW);
    assert.deepEqual(keyStanding({ spendLimit: 100n, dailySpendLimit: 40n }, spending, 20n, NOW), {
      spent: 30n, spentToday: 30n, spentThisMonth: 30n, held: 20n, remaining: 50n, remainingToday: 0n, remainingThisMonth: undefined,
    });
    assert.deepEqual(keyStanding({ monthlySpendLimit: 45n }, spending, 0n, NOW).remainingThisMonth, 15n);
    assert.equal(keyStanding({}, spending, 0n, NOW).remaining, undefined);
    assert.equal(keyStanding({ spendLimit: 50n }, spending, 20n, NOW).remaining, 0n, "exactly used up");
  });
});

describe("key limits: what an operator may set", () => {
  const refused = (field: string, message: RegExp) => (error: unknown) => {
    assert.ok(error instanceof DomainError);
    assert.equal(error.category, "bad_request");
    assert.equal(error.reason, "invalid_key_limit");
    assert.equal(error.facts.field, field);
    assert.match(error.message, message);
    return true;
  };

  it("when limits are given as decimal strings and integers, then they are kept exactly; null or absent is no limit", () => {
    assert.deepEqual(parseKeyLimits({ spendLimit: "5.00", dailySpendLimit: "0.000000000001", monthlySpendLimit: "0", ratePerMinute: 1, maxConcurrentJobs: MAX_CONCURRENT_JOBS }), {
      spendLimit: 5_000_000_000_000n, dailySpendLimit: 1n, monthlySpendLimit: 0n, ratePerMinute: 1, maxConcurrentJobs: MAX_CONCURRENT_JOBS,
    });
    assert.deepEqual(parseKeyLimits({ spendLimit: null, ratePerMinute: null }), {});
    assert.deepEqual(parseKeyLimits({}), {});
    assert.deepEqual(parseKeyLimits({ ratePerMinute: MAX_RATE_PER_MINUTE }), { ratePerMinute: MAX_RATE_PER_MINUTE });
  });

  it("when a spend limit is malformed, negative or too large, then 400 invalid_key_limit naming the field", () => {
    assert.throws(() => parseKeyLimits({ spendLimit: "-1" }), refused("spend_limit", /^spend_limit must be a decimal string/));
    assert.throws(() => parseKeyLimits({ dailySpendLimit: "1e3" }), refused("daily_spend_limit", /^daily_spend_limit must be/));
    assert.throws(() => parseKeyLimits({ monthlySpendLimit: "99999999999999999" }), refused("monthly_spend_limit", /at most/));
  });

  it("when a rate or concurrency is not an integer from 1 to its maximum, then 400 invalid_key_limit naming the field", () => {
    for (const value of [0, -1, 1.5, MAX_RATE_PER_MINUTE + 1]) {
      assert.throws(() => parseKeyLimits({ ratePerMinute: value }), refused("rate_limit_per_minute", new RegExp(`^rate_limit_per_minute must be an integer from 1 to ${MAX_RATE_PER_MINUTE} \\(got ${value}\\)$`)));
    }
    assert.throws(() => parseKeyLimits({ maxConcurrentJobs: MAX_CONCURRENT_JOBS + 1 }), refused("max_concurrent_jobs", /from 1 to 100000/));
    assert.throws(() => parseKeyLimits({ maxConcurrentJobs: 0 }), refused("max_concurrent_jobs", /got 0/));
  });

  it("when limits are changed, then fields not mentioned keep their value and null removes a limit", () => {
    const current = { spendLimit: 10n, ratePerMinute: 5, maxConcurrentJobs: 2 };
    assert.deepEqual(
      changeKeyLimits(current, { spendLimit: "20", maxConcurrentJobs: null, dailySpendLimit: "1" }, new Set(["spendLimit", "maxConcurrentJobs", "dailySpendLimit"])),
      { spendLimit: 20_000_000_000_000n, ratePerMinute: 5, dailySpendLimit: 1_000_000_000_000n },
    );
    assert.deepEqual(changeKeyLimits(current, {}, new Set()), current);
    assert.throws(() => changeKeyLimits(current, { ratePerMinute: 0 }, new Set(["ratePerMinute"])), refused("rate_limit_per_minute", /got 0/));
  });
});

describe("key limits: Idempotency-Key replays", () => {
  it("when a spend limit is below the replayed job's price, then the replay is refused naming it; one that covers the price is admitted whatever was spent", () => {
    assert.deepEqual(replayAdmission({ spendLimit: 0n }, 39n), { kind: "spend", limit: "spend_limit" });
    assert.deepEqual(replayAdmission({ dailySpendLimit: 38n }, 39n), { kind: "spend", limit: "daily_spend_limit" });
    assert.deepEqual(replayAdmission({ monthlySpendLimit: 38n }, 39n), { kind: "spend", limit: "monthly_spend_limit" });
    assert.equal(replayAdmission({ spendLimit: 39n, dailySpendLimit: 39n, monthlySpendLimit: 39n }, 39n), undefined);
  });

  it("when a key has only rate or concurrency limits, then a replay is admitted (it reserves nothing)", () => {
    assert.equal(replayAdmission({ ratePerMinute: 1, maxConcurrentJobs: 1 }, 39n), undefined);
  });
});
