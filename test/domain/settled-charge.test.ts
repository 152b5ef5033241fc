// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Job } from "../../src/domain/jobs/job.js";
import { completeJob, failJob, publicState, settleJob, startJob } from "../../src/domain/jobs/job-state-machine.js";

const queued: Job = {
  id: "job-7", accountId: "acct", model: "aimodel-3.5-flash", kind: "text", status: "queued",
  input: { prompt: "p", inputImageUrls: [], inputBlobKeys: [] },
  createdAt: new Date(0), timeoutSeconds: 60, reservationId: "res-7", reserved: 50n, charged: 0n,
};
const processing = () => startJob(queued, new Date(1), { owner: "w", expiresAt: new Date(60_000) });
const usage = { promptTokens: 10, textOutputTokens: 20, videoOutputTokens: 0 };
const done = (charged: bigint) => completeJob(processing(), new Date(2), { text: "t" }, charged, usage);

describe("a settled job shows what the ledger charged", () => {
  it("when the balance covered only part of the usage, then the settled job shows the part charged", () => {
    const settled = settleJob(done(80n), 35n);
    assert.equal(settled.charged, 35n);
    assert.equal(publicState(settled).charged, 35n);
    assert.equal(settled.settled, true);
  });

  it("when no charge is given, then the job keeps its computed charge", () => {
    assert.equal(settleJob(done(80n)).charged, 80n);
  });

  it("when the charge is exactly the computed one or zero, then it is kept", () => {
    assert.equal(settleJob(done(80n), 80n).charged, 80n);
    assert.equal(settleJob(done(80n), 0n).charged, 0n);
  });

  it("when the charge is above the computed one or negative, then settling refuses it", () => {
    assert.throws(() => settleJob(done(80n), 81n), { message: "job job-7: settled charge 81 outside 0..80" });
    assert.throws(() => settleJob(done(80n), -1n), { message: "job job-7: settled charge -1 outside 0..80" });
  });

  it("when a failed job is settled, then it charges nothing", () => {
    const failed = settleJob(failJob(processing(), new Date(2), "x", "y"));
    assert.equal(failed.charged, 0n);
  });
});
