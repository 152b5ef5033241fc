// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { DomainError } from "../../src/domain/errors/domain-error.js";
import type { Job } from "../../src/domain/jobs/job.js";
import {
  checkJobListInput, checkLimit, checkStatus, compareNewestFirst, decodePageToken, encodePageToken, inListing, LIST_LIMIT, LISTED_STATUSES,
  parseJobListQuery, upperBound, type JobListFilters, type JobListQuery,
} from "../../src/domain/jobs/job-list.js";

const SECRET = Buffer.from("0123456789abcdef0123456789abcdef");
const ACCOUNT = "acct-1";
const JOB_ID = "3f1c2a9e-0b7d-4c55-9a51-2f0f3e7c6d41";
const CURSOR = { createdAt: new Date(1_795_000_000_123), jobId: JOB_ID };
const FILTERS: JobListFilters = { status: "done", model: "aimodel-3-pro-image", createdAfter: new Date(1000), createdBefore: new Date(2000) };

/** A domain refusal with this reason, status 400, and a message matching `message`. */
function refused(reason: string, message: RegExp, field?: string) {
  return (error: unknown) => {
    assert.ok(error instanceof DomainError, String(error));
    assert.equal(error.category, "bad_request");
    assert.equal(error.reason, reason);
    assert.match(error.message, message);
    if (field !== undefined) assert.deepEqual(error.facts, { field });
    return true;
  };
}

/** Signs a payload as the service does (HMAC-SHA256 over the account, the filters and the payload, 16 bytes): the token format, pinned. */
function sign(payload: string, filters: JobListFilters = {}, account = ACCOUNT): string {
  const time = (date: Date | undefined) => (date === undefined ? "" : String(date.getTime()));
  const key = [filters.status ?? "", filters.model ?? "", time(filters.createdAfter), time(filters.createdBefore)].join("\n");
  const mac = createHmac("sha256", SECRET).update(`job-list-page-token\n${account}\n${key}\n${payload}`).digest().subarray(0, 16);
  return `${payload}.${mac.toString("base64url")}`;
}

const encoded = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

const job = (overrides: Partial<Job> = {}): Job => ({
  id: "b", accountId: ACCOUNT, model: "aimodel-3-pro-image", kind: "image", status: "done", settled: true,
  input: { prompt: "p", inputImageUrls: [], inputBlobKeys: [] },
  createdAt: new Date(1500), timeoutSeconds: 60, reservationId: "r", reserved: 1n, charged: 1n,
  ...overrides,
});

const query = (overrides: Partial<JobListQuery> = {}): JobListQuery => ({ accountId: ACCOUNT, limit: 20, ...overrides });

describe("job listing: page size", () => {
  it("when no limit is given, then the page size is 20; 1 and 100 are accepted as they are", () => {
    assert.deepEqual(LIST_LIMIT, { min: 1, max: 100, default: 20 });
    assert.equal(checkLimit(undefined), 20);
    assert.equal(checkLimit(1), 1);
    assert.equal(checkLimit(100), 100);
  });

  it("when the limit is 0, 101, negative, fractional or not a number, then it is 400 invalid_limit naming the bounds and the value", () => {
    for (const limit of [0, 101, -1, 1.5, Number.NaN]) {
      assert.throws(() => checkLimit(limit), refused("invalid_limit", new RegExp(`^limit must be an integer from 1 to 100 \\(got ${limit}\\)$`), "limit"));
    }
    assert.throws(() => checkLimit(Number.NaN, '"abc"'), refused("invalid_limit", /\(got "abc"\)$/));
  });
});

describe("job listing: filters", () => {
  it("when a status is one of the five, then it filters; anything else is 400 invalid_status listing them", () => {
    assert.deepEqual(LISTED_STATUSES, ["queued", "processing", "done", "failed", "canceled"]);
    for (const status of LISTED_STATUSES) assert.equal(checkStatus(status), status);
    assert.equal(checkStatus(undefined), undefined);
    for (const status of ["DONE", "finished", "", "7"]) {
      assert.throws(
        () => checkStatus(status),
        refused("invalid_status", new RegExp(`^status must be one of queued, processing, done, failed, canceled \\(got "${status}"\\)$`), "status"),
      );
    }
  });

  it("when a model is given, then an alias is resolved to its model and an unknown one is 400 invalid_model", () => {
    assert.equal(checkJobListInput({ model: "aimodel-3-pro-image-preview" }).filters.model, "aimodel-3-pro-image");
    assert.equal(checkJobListInput({ model: "aimodel-3.5-flash" }).filters.model, "aimodel-3.5-flash");
    assert.equal(checkJobListInput({}).filters.model, undefined);
    assert.throws(() => checkJobListInput({ model: "nope" }), refused("invalid_model", /^model "nope" is not a model of this service \(see GET \/api\/v1\/models\)$/, "model"));
  });

  it("when a time range is given, then any span is accepted, equal bounds too, but an inverted one is 400 invalid_time_range", () => {
    const wide = checkJobListInput({ createdAfter: new Date(0), createdBefore: new Date(8.64e15) });
    assert.deepEqual(wide.filters, { status: undefined, model: undefined, createdAfter: new Date(0), createdBefore: new Date(8.64e15) });
    assert.equal(wide.limit, 20);
    checkJobListInput({ createdAfter: new Date(5), createdBefore: new Date(5) });
    checkJobListInput({ createdAfter: new Date(5) });
    checkJobListInput({ createdBefore: new Date(5) });
    assert.throws(
      () => checkJobListInput({ createdAfter: new Date(6), createdBefore: new Date(5) }),
      refused("invalid_time_range", /^created_after must not be later than created_before$/, "created_after"),
    );
  });

  it("when a bound is not a valid time, then it is 400 invalid_time_range naming it", () => {
    assert.throws(() => checkJobListInput({ createdAfter: new Date(Number.NaN) }), refused("invalid_time_range", /^created_after is not a valid time$/, "created_after"));
    assert.throws(() => checkJobListInput({ createdBefore: new Date(Number.NaN) }), refused("invalid_time_range", /^created_before is not a valid time$/, "created_before"));
  });

  it("when several things are wrong, then the limit is reported first, then the status, the model, the range", () => {
    assert.throws(() => checkJobListInput({ limit: 0, status: "x", model: "y" }), refused("invalid_limit", /limit/));
    assert.throws(() => checkJobListInput({ status: "x", model: "y" }), refused("invalid_status", /status/));
    assert.throws(() => checkJobListInput({ model: "y", createdAfter: new Date(2), createdBefore: new Date(1) }), refused("invalid_model", /model/));
  });
});

describe("job listing: page tokens", () => {
  it("when a cursor is encoded, then the token is base64url JSON and a 16-byte HMAC, stable across releases", () => {
    assert.equal(
      encodePageToken(SECRET, ACCOUNT, {}, CURSOR),
      "WzEsMTc5NTAwMDAwMDEyMywiM2YxYzJhOWUtMGI3ZC00YzU1LTlhNTEtMmYwZjNlN2M2ZDQxIl0.bNgSFTxQbQYB-4LLtMm2cw",
    );
    assert.equal(encodePageToken(SECRET, ACCOUNT, FILTERS, { createdAt: new Date(1500), jobId: "0a" }), "WzEsMTUwMCwiMGEiXQ.NQXm3ManAj7WDUE7CyeDlA");
    assert.equal(encodePageToken(SECRET, ACCOUNT, FILTERS, CURSOR), sign(encoded([1, CURSOR.createdAt.getTime(), JOB_ID]), FILTERS));
  });

  it("when a token is decoded with the account and filters it was issued for, then it gives back its cursor", () => {
    for (const filters of [{}, FILTERS]) {
      assert.deepEqual(decodePageToken(SECRET, ACCOUNT, filters, encodePageToken(SECRET, ACCOUNT, filters, CURSOR)), CURSOR);
    }
  });

  it("when a token is used by another account, with other filters or another secret, then it is 400 invalid_page_token", () => {
    const token = encodePageToken(SECRET, ACCOUNT, FILTERS, CURSOR);
    const altered = refused("invalid_page_token", /^page_token is not valid: it was altered, or issued for another account or other filters; start again without it$/, "page_token");
    assert.throws(() => decodePageToken(SECRET, "acct-2", FILTERS, token), altered);
    assert.throws(() => decodePageToken(Buffer.from("another secret"), ACCOUNT, FILTERS, token), altered);
    const others: JobListFilters[] = [
      { ...FILTERS, status: "failed" }, { ...FILTERS, status: undefined },
      { ...FILTERS, model: "aimodel-3.5-flash" }, { ...FILTERS, model: undefined },
      { ...FILTERS, createdAfter: new Date(1001) }, { ...FILTERS, createdAfter: undefined },
      { ...FILTERS, createdBefore: new Date(2001) }, { ...FILTERS, createdBefore: undefined },
    ];
    for (const filters of others) assert.throws(() => decodePageToken(SECRET, ACCOUNT, filters, token), altered, JSON.stringify(filters));
  });

  it("when a token is altered, truncated or extended, then it is 400 invalid_page_token", () => {
    const token = encodePageToken(SECRET, ACCOUNT, {}, CURSOR);
    const [payload, mac] = token.split(".") as [string, string];
    const altered = refused("invalid_page_token", /it was altered/);
    assert.throws(() => decodePageToken(SECRET, ACCOUNT, {}, `${payload}.${mac.slice(0, -1)}`), altered);
    assert.throws(() => decodePageToken(SECRET, ACCOUNT, {}, `${payload}.${mac}AA`), altered);
    assert.throws(() => decodePageToken(SECRET, ACCOUNT, {}, `${payload}.${mac[0] === "A" ? "B" : "A"}${mac.slice(1)}`), altered);
    assert.throws(() => decodePageToken(SECRET, ACCOUNT, {}, `${encoded([1, 0, JOB_ID])}.${mac}`), altered);
    // 16 bytes take 22 base64url characters, the last one with 4 unused bits: another spelling of the same bytes is still refused.
    const last = mac[mac.length - 1]!;
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const sameBits = alphabet[(alphabet.indexOf(last) & ~0b1111) | ((alphabet.indexOf(last) + 1) & 0b1111)]!;
    assert.deepEqual(Buffer.from(mac.slice(0, -1) + sameBits, "base64url"), Buffer.from(mac, "base64url"), "the same bytes");
    assert.throws(() => decodePageToken(SECRET, ACCOUNT, {}, `${payload}.${mac.slice(0, -1)}${sameBits}`), altered);
  });

  it("when a token is not of the form payload.signature in base64url, then it is 400 invalid_page_token before any signature is checked", () => {
    const notOurs = refused("invalid_page_token", /^page_token is not valid: it is not a token of this service; start again without it$/, "page_token");
    const token = encodePageToken(SECRET, ACCOUNT, {}, CURSOR);
    for (const text of ["", "garbage", "a.b.c", ".abc", "abc.", `${token}=`, `${token}.x`, `x${token.replace(".", "+")}`, `${token} `, `a/b.c`]) {
      assert.throws(() => decodePageToken(SECRET, ACCOUNT, {}, text), notOurs, JSON.stringify(text));
    }
  });

  it("when a signed payload is not JSON or not a cursor of this version, then it is 400 invalid_page_token", () => {
    const unreadable = refused("invalid_page_token", /^page_token is not valid: it cannot be read; start again without it$/);
    assert.throws(() => decodePageToken(SECRET, ACCOUNT, {}, sign(Buffer.from("{not json").toString("base64url"))), unreadable);
    const unknown = refused("invalid_page_token", /^page_token is not valid: it has an unknown format; start again without it$/);
    const payloads: unknown[] = [
      { v: 1 }, "x", null, [1, 5], [1, 5, "ab", 0], [2, 5, "ab"], [0, 5, "ab"], ["1", 5, "ab"],
      [1, 1.5, "ab"], [1, "5", "ab"], [1, 2 ** 53, "ab"], [1, 8.64e15 + 1, "ab"],
      [1, 5, 7], [1, 5, ""], [1, 5, "AB"], [1, 5, "a b"], [1, 5, "a".repeat(65)],
    ];
    for (const payload of payloads) assert.throws(() => decodePageToken(SECRET, ACCOUNT, {}, sign(encoded(payload))), unknown, JSON.stringify(payload));
    // The edges that are cursors: the epoch, the last instant a Date holds, a 64-character id.
    assert.deepEqual(decodePageToken(SECRET, ACCOUNT, {}, sign(encoded([1, 0, "a".repeat(64)]))), { createdAt: new Date(0), jobId: "a".repeat(64) });
    assert.deepEqual(decodePageToken(SECRET, ACCOUNT, {}, sign(encoded([1, 8.64e15, "0-9"]))), { createdAt: new Date(8.64e15), jobId: "0-9" });
  });

  it("when a query is parsed, then its filters, limit and the token's cursor make the store query; an empty token is none", () => {
    const token = encodePageToken(SECRET, ACCOUNT, { status: "done" }, CURSOR);
    assert.deepEqual(parseJobListQuery(SECRET, ACCOUNT, { status: "done", limit: 5, pageToken: token }), {
      status: "done", model: undefined, createdAfter: undefined, createdBefore: undefined, accountId: ACCOUNT, limit: 5, after: CURSOR,
    });
    assert.equal(parseJobListQuery(SECRET, ACCOUNT, { pageToken: "" }).after, undefined);
    assert.equal(parseJobListQuery(SECRET, ACCOUNT, {}).limit, 20);
    assert.throws(() => parseJobListQuery(SECRET, ACCOUNT, { pageToken: token }), refused("invalid_page_token", /altered/));
  });
});

describe("job listing: order and membership", () => {
  it("when two positions are compared, then the later one comes first, and at the same instant the greater id", () => {
    const at = (ms: number, jobId: string) => ({ createdAt: new Date(ms), jobId });
    assert.ok(compareNewestFirst(at(2, "a"), at(1, "b")) < 0);
    assert.ok(compareNewestFirst(at(1, "b"), at(2, "a")) > 0);
    assert.ok(compareNewestFirst(at(1, "b"), at(1, "a")) < 0);
    assert.ok(compareNewestFirst(at(1, "a"), at(1, "b")) > 0);
    assert.equal(compareNewestFirst(at(1, "a"), at(1, "a")), 0);
    const sorted = [at(1, "a"), at(3, "a"), at(2, "b"), at(2, "c"), at(2, "a")].sort(compareNewestFirst);
    assert.deepEqual(sorted.map((p) => `${p.createdAt.getTime()}${p.jobId}`), ["3a", "2c", "2b", "2a", "1a"]);
  });

  it("when the cursor and created_before both bound a page, then the older of the two is its upper bound", () => {
    assert.equal(upperBound({}), undefined);
    assert.deepEqual(upperBound({ after: CURSOR }), CURSOR);
    assert.deepEqual(upperBound({ createdBefore: new Date(5) }), { createdAt: new Date(5), jobId: "" });
    const cursor = { createdAt: new Date(5), jobId: "ab" };
    assert.deepEqual(upperBound({ after: cursor, createdBefore: new Date(6) }), cursor);
    assert.deepEqual(upperBound({ after: cursor, createdBefore: new Date(4) }), { createdAt: new Date(4), jobId: "" });
    // At the same instant no id is below "": created_before wins.
    assert.deepEqual(upperBound({ after: cursor, createdBefore: new Date(5) }), { createdAt: new Date(5), jobId: "" });
    // A tie (the same position) is created_before's bound, not the cursor.
    const tie = { createdAt: new Date(5), jobId: "" };
    assert.notEqual(upperBound({ after: tie, createdBefore: new Date(5) }), tie);
  });

  it("when a job is checked against a query, then its account, status, model, strict time bounds and the cursor all decide", () => {
    assert.equal(inListing(job(), query()), true);
    assert.equal(inListing(job({ accountId: "acct-2" }), query()), false);
    assert.equal(inListing(job(), query({ status: "done" })), true);
    assert.equal(inListing(job(), query({ status: "failed" })), false);
    assert.equal(inListing(job(), query({ model: "aimodel-3-pro-image" })), true);
    assert.equal(inListing(job(), query({ model: "aimodel-3.5-flash" })), false);
    assert.equal(inListing(job(), query({ createdAfter: new Date(1499) })), true);
    assert.equal(inListing(job(), query({ createdAfter: new Date(1500) })), false);
    assert.equal(inListing(job(), query({ createdBefore: new Date(1501) })), true);
    assert.equal(inListing(job(), query({ createdBefore: new Date(1500) })), false);
    assert.equal(inListing(job(), query({ after: { createdAt: new Date(1501), jobId: "a" } })), true);
    assert.equal(inListing(job(), query({ after: { createdAt: new Date(1500), jobId: "c" } })), true);
    assert.equal(inListing(job(), query({ after: { createdAt: new Date(1500), jobId: "b" } })), false, "the cursor's own job is not listed again");
    assert.equal(inListing(job(), query({ after: { createdAt: new Date(1500), jobId: "a" } })), false);
    assert.equal(inListing(job(), query({ after: { createdAt: new Date(1499), jobId: "z" } })), false);
  });

  it("when a job's outcome is decided but its money has not moved, then it is listed as processing, as clients see it", () => {
    const unsettled = job({ status: "done", settled: undefined });
    assert.equal(inListing(unsettled, query({ status: "processing" })), true);
    assert.equal(inListing(unsettled, query({ status: "done" })), false);
    assert.equal(inListing(job({ status: "failed", settled: false }), query({ status: "failed" })), false);
    assert.equal(inListing(job({ status: "queued", settled: undefined }), query({ status: "queued" })), true);
  });
});
