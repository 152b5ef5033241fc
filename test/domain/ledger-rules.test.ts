// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DomainError } from "../../src/domain/errors/domain-error.js";
import { checkTimeRange, encodeStatementToken, matchesStatementFilter, parseStatementQuery } from "../../src/domain/ledger/statement.js";
import {
  checkGrouping, DEFAULT_USAGE_DAYS, groupOf, MAX_USAGE_DAYS, parseUsageQuery, summarizeUsage, type SettledCharge,
} from "../../src/domain/ledger/usage.js";
import { readPageToken, signPageToken } from "../../src/domain/paging/page-token.js";

const SECRET = Buffer.from("0123456789abcdef0123456789abcdef");
const DAY = 86_400_000;

function refusal(reason: string, message?: RegExp, field?: string) {
  return (error: unknown) => {
    assert.ok(error instanceof DomainError, String(error));
    assert.equal(error.category, "bad_request");
    assert.equal(error.reason, reason);
    if (message) assert.match(error.message, message);
    if (field) assert.equal(error.facts.field, field);
    return true;
  };
}

describe("statement: ranges and page tokens", () => {
  it("when a range is given, then from must not be after to (equal is an empty range) and both must be valid times", () => {
    checkTimeRange(undefined, undefined);
    checkTimeRange(new Date(5), new Date(5));
    checkTimeRange(new Date(5), undefined);
    checkTimeRange(undefined, new Date(5));
    assert.throws(() => checkTimeRange(new Date(6), new Date(5)), refusal("invalid_time_range", /^from must not be later than to$/, "from"));
    assert.throws(() => checkTimeRange(new Date(Number.NaN), undefined), refusal("invalid_time_range", /^from is not a valid time$/, "from"));
    assert.throws(() => checkTimeRange(undefined, new Date(Number.NaN)), refusal("invalid_time_range", /^to is not a valid time$/, "to"));
  });

  it("when a statement is asked without a token, then it gets the limit (20 by default) and the range, and no cursor", () => {
    assert.deepEqual(parseStatementQuery(SECRET, "acct", {}), { accountId: "acct", limit: 20, from: undefined, to: undefined, before: undefined });
    const from = new Date(1000);
    const to = new Date(2000);
    assert.deepEqual(parseStatementQuery(SECRET, "acct", { limit: 100, from, to }), { accountId: "acct", limit: 100, from, to, before: undefined });
    assert.throws(() => parseStatementQuery(SECRET, "acct", { limit: 101 }), refusal("invalid_limit"));
    assert.throws(() => parseStatementQuery(SECRET, "acct", { limit: 0 }), refusal("invalid_limit"));
  });

  it("when a token issued for a page is sent back with the same account and range, then the page continues below its cursor", () => {
    const from = new Date(1000);
    const cursor = { seq: 123_000_000_000_000_000_123n, at: new Date(1_700_000_000_000) };
    const token = encodeStatementToken(SECRET, { accountId: "acct", from, to: undefined }, cursor);
    assert.deepEqual(parseStatementQuery(SECRET, "acct", { pageToken: token, from }).before, cursor);
  });

  it("when a token is used with another account or range, altered, or forged, then it is 400 invalid_page_token", () => {
    const token = encodeStatementToken(SECRET, { accountId: "acct" }, { seq: 5n, at: new Date(10) });
    assert.throws(() => parseStatementQuery(SECRET, "other", { pageToken: token }), refusal("invalid_page_token", /altered, or issued for another account/, "page_token"));
    assert.throws(() => parseStatementQuery(SECRET, "acct", { pageToken: token, from: new Date(1) }), refusal("invalid_page_token"));
    assert.throws(() => parseStatementQuery(SECRET, "acct", { pageToken: token, to: new Date(1) }), refusal("invalid_page_token"));
    assert.throws(() => parseStatementQuery(Buffer.from("another secret"), "acct", { pageToken: token }), refusal("invalid_page_token"));
    assert.throws(() => parseStatementQuery(SECRET, "acct", { pageToken: "x" }), refusal("invalid_page_token", /not a token of this service/));
    const [payload, mac] = token.split(".") as [string, string];
    const flipped = `${payload}.${mac.slice(0, -1)}${mac.endsWith("A") ? "B" : "A"}`;
    assert.throws(() => parseStatementQuery(SECRET, "acct", { pageToken: flipped }), refusal("invalid_page_token"));
  });

  it("when a token is signed but not a statement's (another purpose, version or shape), then it is refused as of an unknown format", () => {
    const scope = { purpose: "ledger-page-token", accountId: "acct", filters: "\n" };
    for (const fields of [[2, "5", 10], [1, 5, 10], [1, "5", "10"], [1, "-5", 10], [1, "5x", 10], [1, "x5", 10], [1, "5"], [1, "5", 10, 1]]) {
      const token = signPageToken(SECRET, scope, fields);
      assert.throws(() => parseStatementQuery(SECRET, "acct", { pageToken: token }), refusal("invalid_page_token", /unknown format/), JSON.stringify(fields));
    }
    const jobs = signPageToken(SECRET, { ...scope, purpose: "job-list-page-token" }, [1, "5", 10]);
    assert.throws(() => parseStatementQuery(SECRET, "acct", { pageToken: jobs }), refusal("invalid_page_token", /altered/));
  });

  it("when a statement is filtered, then the filter is checked, an alias names its model, and a token holds only for its own filter", () => {
    assert.deepEqual(parseStatementQuery(SECRET, "acct", { types: ["charge", "release", "charge"], source: "text_call" }).filter,
      { types: ["charge", "release"], model: undefined, keyId: undefined, source: "text_call" });
    assert.equal(parseStatementQuery(SECRET, "acct", { types: [], model: "", keyId: "", source: "" }).filter, undefined);
    assert.throws(() => parseStatementQuery(SECRET, "acct", { types: ["refund"] }), refusal("invalid_entry_type", /got "refund"/, "type"));
    assert.throws(() => parseStatementQuery(SECRET, "acct", { source: "jobs" }), refusal("invalid_entry_source", /got "jobs"/, "source"));
    assert.throws(() => parseStatementQuery(SECRET, "acct", { model: "nope" }), refusal("invalid_model", /"nope"/, "model"));
    assert.throws(() => parseStatementQuery(SECRET, "acct", { keyId: "k".repeat(201) }), refusal("field_too_long", /key_id/, "key_id"));
    const filter = { types: ["charge"], source: "text_call" as const };
    const cursor = { seq: 9n, at: new Date(20) };
    const token = encodeStatementToken(SECRET, { accountId: "acct", filter }, cursor);
    assert.deepEqual(parseStatementQuery(SECRET, "acct", { pageToken: token, types: ["charge"], source: "text_call" }).before, cursor);
    assert.throws(() => parseStatementQuery(SECRET, "acct", { pageToken: token, types: ["charge"] }), refusal("invalid_page_token"));
    assert.throws(() => parseStatementQuery(SECRET, "acct", { pageToken: token }), refusal("invalid_page_token"));
  });

  it("when entries are matched against a filter, then every filter set must hold; credits have no model, key or source", () => {
    const credit = { type: "credit" };
    const call = { type: "charge", memo: { model: "m", keyId: "k" } };
    const job = { type: "charge", memo: { jobId: "j", model: "m", keyId: "k" } };
    const match = (filter: Parameters<typeof matchesStatementFilter>[0]) => [credit, call, job].map((entry) => matchesStatementFilter(filter, entry));
    assert.deepEqual(match({ source: "text_call" }), [false, true, false]);
    assert.deepEqual(match({ source: "job" }), [false, false, true]);
    assert.deepEqual(match({ types: ["credit"] }), [true, false, false]);
    assert.deepEqual(match({ model: "m" }), [false, true, true]);
    assert.deepEqual(match({ keyId: "k", source: "job" }), [false, false, true]);
    assert.deepEqual(match({ keyId: "other" }), [false, false, false]);
  });

  it("when page tokens are read, then only their own signed JSON arrays come back", () => {
    const scope = { purpose: "p", accountId: "a", filters: "f" };
    assert.deepEqual(readPageToken(SECRET, scope, signPageToken(SECRET, scope, [1, "x", 3])), [1, "x", 3]);
    const notArray = signPageToken(SECRET, scope, { a: 1 } as unknown as unknown[]);
    assert.throws(() => readPageToken(SECRET, scope, notArray), refusal("invalid_page_token", /unknown format/));
    for (const other of [{ ...scope, purpose: "q" }, { ...scope, accountId: "b" }, { ...scope, filters: "g" }]) {
      assert.throws(() => readPageToken(SECRET, other, signPageToken(SECRET, scope, [1])), refusal("invalid_page_token", /altered/));
    }
    assert.throws(() => readPageToken(SECRET, scope, "a.b.c"), refusal("invalid_page_token", /not a token/));
    assert.throws(() => readPageToken(SECRET, scope, "a b.c"), refusal("invalid_page_token", /not a token/));
  });
});

describe("usage reports", () => {
  const NOW = new Date("2026-11-23T12:00:00.000Z");

  it("when no range is given, then it is the last 30 days up to now, grouped by model", () => {
    assert.equal(DEFAULT_USAGE_DAYS, 30);
    assert.deepEqual(parseUsageQuery({}, NOW), { from: new Date(NOW.getTime() - 30 * DAY), to: NOW, groupBy: "model" });
    const to = new Date("2026-06-01T00:00:00Z");
    assert.deepEqual(parseUsageQuery({ to }, NOW), { from: new Date(to.getTime() - 30 * DAY), to, groupBy: "model" });
    const from = new Date("2026-11-01T00:00:00Z");
    assert.deepEqual(parseUsageQuery({ from, groupBy: "day" }, NOW), { from, to: NOW, groupBy: "day" });
    const future = new Date("2027-01-01T00:00:00Z");
    assert.deepEqual(parseUsageQuery({ from: future }, NOW), { from: future, to: future, groupBy: "model" }, "a future start is an empty range");
  });

  it("when the range is wider than 366 days or inverted, then 400 invalid_time_range", () => {
    assert.equal(MAX_USAGE_DAYS, 366);
    const from = new Date("2025-01-01T00:00:00Z");
    parseUsageQuery({ from, to: new Date(from.getTime() + 366 * DAY) }, NOW);
    assert.throws(() => parseUsageQuery({ from, to: new Date(from.getTime() + 366 * DAY + 1) }, NOW), refusal("invalid_time_range", /at most 366 days/, "from"));
    assert.throws(() => parseUsageQuery({ from: NOW, to: from }, NOW), refusal("invalid_time_range", /later than/));
  });

  it("when the grouping is model, key or day, then it is kept; empty is model; anything else is 400 invalid_group_by", () => {
    assert.deepEqual(["model", "key", "day", "", undefined].map(checkGrouping), ["model", "key", "day", "model", "model"]);
    assert.throws(() => checkGrouping("week"), refusal("invalid_group_by", /^group_by must be one of model, key, day \(got "week"\)$/, "group_by"));
  });

  const charge = (over: Partial<SettledCharge>): SettledCharge => ({
    amount: 10n, model: "m1", keyId: "k1", promptTokens: 1, candidatesTokens: 2, at: new Date("2026-11-20T10:00:00Z"), ...over,
  });

  it("when charges are summarized, then each group adds requests, tokens and spend exactly, groups in order, only inside [from, to)", () => {
    const query = { from: new Date("2026-11-20T00:00:00Z"), to: new Date("2026-11-22T00:00:00Z"), groupBy: "model" as const };
    const charges = [
      charge({}), charge({ model: "m0", amount: 7n, promptTokens: 3, candidatesTokens: 4 }), charge({ amount: 1n }),
      charge({ at: new Date("2026-11-19T23:59:59.999Z") }), charge({ at: query.to }), charge({ at: query.from, amount: 100n }),
    ];
    assert.deepEqual(summarizeUsage(charges, query), [
      { group: "m0", requests: 1, promptTokens: 3, candidatesTokens: 4, spend: 7n },
      { group: "m1", requests: 3, promptTokens: 3, candidatesTokens: 6, spend: 111n },
    ]);
    assert.deepEqual(summarizeUsage([], query), []);
  });

  it("when a charge is grouped, then it goes under its model, its key (\"\" when unknown) or its UTC day", () => {
    const c = charge({ at: new Date("2026-11-20T23:30:00-05:00") });
    assert.equal(groupOf(c, "model"), "m1");
    assert.equal(groupOf(c, "key"), "k1");
    assert.equal(groupOf(c, "day"), "2026-11-21");
    assert.equal(groupOf(charge({ keyId: undefined }), "key"), "");
    assert.equal(groupOf(charge({ model: undefined }), "model"), "");
    const byDay = summarizeUsage([charge({}), charge({ at: new Date("2026-11-21T00:00:00Z") })], {
      from: new Date(0), to: NOW, groupBy: "day",
    });
    assert.deepEqual(byDay.map((row) => row.group), ["2026-11-20", "2026-11-21"]);
  });
});
