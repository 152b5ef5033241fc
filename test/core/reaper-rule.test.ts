// backends: embedded
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { intentAbandoned, newTextCallIntentId } from "../../src/core/money/holds.js";

describe("when the reaper finds an intent that holds money and left no job", () => {
  const limits = { textCallLimitMs: 600_000, requeueAfterMs: 30_000 };

  it("then a job's acceptance is abandoned once older than REQUEUE_AFTER, not before", () => {
    const jobId = "4f1c2f9e-5a3b-4c4d-9e8f-0a1b2c3d4e5f";
    assert.equal(intentAbandoned(jobId, 30_000, limits), false);
    assert.equal(intentAbandoned(jobId, 30_001, limits), true);
  });

  it("then a synchronous text call is given its whole TEXT_CALL_LIMIT, however long acceptances wait", () => {
    const textCall = newTextCallIntentId();
    assert.equal(intentAbandoned(textCall, 599_999, limits), false);
    assert.equal(intentAbandoned(textCall, 600_000, limits), false);
    assert.equal(intentAbandoned(textCall, 600_001, limits), true);
  });

  it("then each text call's intent id is its own and never a job id", () => {
    const a = newTextCallIntentId();
    const b = newTextCallIntentId();
    assert.notEqual(a, b);
    assert.match(a, /^text-call-[0-9a-f-]{36}$/);
  });
});
