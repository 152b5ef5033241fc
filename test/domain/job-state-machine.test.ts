// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { canTransition, completeJob, failJob, IllegalTransitionError, startJob } from "../../src/domain/jobs/job-state-machine.js";
import type { Job, JobStatus } from "../../src/domain/jobs/job.js";

const queued: Job = {
  id: "j", accountId: "a", model: "m", kind: "image", status: "queued",
  input: { prompt: "p", inputImageUrls: [], inputBlobKeys: [] },
  createdAt: new Date(0), timeoutSeconds: 60, reservationId: "r", reserved: 5n, charged: 0n,
};

describe("job state machine (spec section 3)", () => {
  it("allows exactly the documented transitions", () => {
    const all: JobStatus[] = ["queued", "processing", "done", "failed", "canceled"];
    const allowed = new Set([
      "queued>processing", "queued>failed", "queued>canceled", "processing>done", "processing>failed", "processing>canceled",
    ]);
    for (const from of all) for (const to of all) assert.equal(canTransition(from, to), allowed.has(`${from}>${to}`), `${from} → ${to}`);
  });

  it("sets started_at on processing, finished_at, result and charge on done", () => {
    const started = startJob(queued, new Date(1000));
    assert.equal(started.startedAt?.getTime(), 1000);
    const done = completeJob(started, new Date(2000), { text: "hi" }, 5n);
    assert.equal(done.status, "done");
    assert.equal(done.finishedAt?.getTime(), 2000);
    assert.equal(done.charged, 5n);
  });

  it("records the error and charges nothing on failure", () => {
    const failed = failJob(startJob(queued, new Date(1)), new Date(2), "missing_input_images", "gone");
    assert.equal(failed.error, "missing_input_images");
    assert.equal(failed.charged, 0n);
  });

  it("refuses to leave a terminal state", () => {
    const done = completeJob(startJob(queued, new Date(1)), new Date(2), {}, 5n);
    assert.throws(() => failJob(done, new Date(3), "x", "y"), IllegalTransitionError);
    assert.throws(() => startJob(done, new Date(3)), IllegalTransitionError);
  });
});
