// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { checkWaitSeconds, eventIdOf, isNews, MAX_WAIT_SECONDS, seenUpTo } from "../../src/domain/jobs/job-events.js";
import { DomainError } from "../../src/domain/errors/domain-error.js";
import type { JobStatus } from "../../src/domain/jobs/job.js";

describe("following a job: event ids and resumption", () => {
  it("when a job is in a state, then its event id is its place in the job's life: 1 queued, 2 processing, 3 any end", () => {
    const ids = (["queued", "processing", "done", "failed", "canceled"] as JobStatus[]).map(eventIdOf);
    assert.deepEqual(ids, ["1", "2", "3", "3", "3"]);
  });

  it("when a watcher resumes with an id this service sends, then it has seen up to it; any other id counts as nothing seen", () => {
    assert.deepEqual(["1", "2", "3"].map(seenUpTo), [1, 2, 3]);
    for (const other of [undefined, "", "0", "4", "03", " 1", "1.0", "banana", "-1"]) assert.equal(seenUpTo(other), 0, String(other));
  });

  it("when a watcher has seen up to a point, then only later states are news", () => {
    assert.equal(isNews("queued", 0), true);
    assert.equal(isNews("queued", 1), false);
    assert.equal(isNews("processing", 1), true);
    assert.equal(isNews("processing", 2), false);
    assert.equal(isNews("done", 2), true);
    assert.equal(isNews("canceled", 3), false);
    assert.equal(isNews("failed", 0), true);
  });
});

describe("following a job: Prefer: wait", () => {
  it("when a wait is a whole number of seconds from 0 to 60, then it is kept; unset stays unset", () => {
    assert.equal(MAX_WAIT_SECONDS, 60);
    for (const seconds of [0, 1, 30, 60]) assert.equal(checkWaitSeconds(seconds), seconds);
    assert.equal(checkWaitSeconds(undefined), undefined);
  });

  it("when a wait is over 60, negative or fractional, then it is 400 invalid_wait naming the bound", () => {
    for (const seconds of [61, -1, 1.5, Number.NaN, 1e9]) {
      assert.throws(() => checkWaitSeconds(seconds), (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.equal(error.category, "bad_request");
        assert.equal(error.reason, "invalid_wait");
        assert.equal(error.message, `wait must be a whole number of seconds from 0 to 60 (got ${seconds})`);
        return true;
      });
    }
  });
});
