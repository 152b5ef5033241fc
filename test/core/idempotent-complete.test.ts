// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { idempotent } from "../../src/core/jobs/idempotent.js";
import type { IdempotencyStore } from "../../src/ports/idempotency-store.js";
import { noTelemetry } from "../../src/ports/telemetry.js";
import { captureLog } from "../support/capture-log.js";

/** A store that grants every claim and fails `complete` with the given errors, in turn, before it succeeds. */
function storeFailingComplete(failures: Error[]): { store: IdempotencyStore; completions: () => number } {
  let calls = 0;
  const store: IdempotencyStore = {
    claim: async () => ({ kind: "claimed", token: "t" }),
    takeOver: async () => ({ kind: "claimed", token: "t" }),
    complete: async () => {
      const failure = failures[calls++];
      if (failure) throw failure;
    },
    abandon: async () => {},
    purgeExpired: async () => 0,
  };
  return { store, completions: () => calls };
}

const options = { scope: "acct", key: "k1", operation: "create", request: { prompt: "p" }, ttlMs: 60_000, retryAfterSeconds: 1, staleBefore: new Date(0) };
const work = { newResponse: () => ({ jobId: "job-1" }), accept: async () => ({ jobId: "job-1" }), resolveDead: async () => "gone" as const };

describe("recording an accepted job's Idempotency-Key as complete", () => {
  it("when recording fails twice, then the third try records it and the job is answered without an error logged", async () => {
    const { store, completions } = storeFailingComplete([new Error("cassandra timed out"), new Error("cassandra timed out")]);
    const log = captureLog();
    const outcome = await idempotent(store, { logger: log.logger, telemetry: noTelemetry }, options, work);
    assert.deepEqual(outcome, { response: { jobId: "job-1" }, replayed: false });
    assert.equal(completions(), 3);
    assert.deepEqual(log.messages(), []);
  });

  it("when every one of three tries fails (a TypeError too), then the job is still answered and the failure is logged once", async () => {
    const failures = [new Error("down"), new TypeError("Cannot read properties of undefined"), new Error("still down"), new Error("never asked")];
    const { store, completions } = storeFailingComplete(failures);
    const log = captureLog();
    const outcome = await idempotent(store, { logger: log.logger, telemetry: noTelemetry }, options, work);
    assert.deepEqual(outcome, { response: { jobId: "job-1" }, replayed: false });
    assert.equal(completions(), 3);
    assert.deepEqual(log.messages(), ["the Idempotency-Key of an accepted job could not be recorded as complete"]);
    assert.equal(log.lines[0]!.job_id, "job-1");
  });
});
