import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Job, JobStatus } from "../../../src/domain/jobs/job.js";
import {
  cancelJob, chargesOnFinish, canTransition, completeJob, failJob, IllegalTransitionError, isTerminal, leaseExpired, publicState, settleJob, startJob, takeOverJob,
  TERMINAL_STATUSES,
} from "../../../src/domain/jobs/job-state-machine.js";
import { FairQueue } from "../../../src/domain/scheduling/fair-queue.js";
import { webhookMessageId, webhookPayload } from "../../../src/domain/webhooks/payload.js";

const T0 = new Date(1_000);
const T1 = new Date(2_000);
const T2 = new Date(3_000);
const LEASE = { owner: "worker-1", expiresAt: new Date(60_000) };

const queued: Job = {
  id: "job-1", accountId: "acct", model: "aimodel-3.5-flash", kind: "text", status: "queued",
  input: { prompt: "p", inputImageUrls: [], inputBlobKeys: [] },
  createdAt: new Date(0), timeoutSeconds: 60, reservationId: "res-1", reserved: 5n, charged: 0n,
};
const processing = (): Job => startJob(queued, T0, LEASE);
const done = (): Job => completeJob(processing(), T1, { text: "answer", blobKey: "b", mimeType: "text/plain" }, 4n, {
  promptTokens: 1, textOutputTokens: 2, videoOutputTokens: 0,
});
const failed = (): Job => failJob(processing(), T1, "upstream_error", "the upstream broke");

/** The error a transition throws; fails the test when it throws nothing or something else. */
function illegal(work: () => unknown): IllegalTransitionError {
  try {
    work();
  } catch (error) {
    assert.ok(error instanceof IllegalTransitionError, String(error));
    return error;
  }
  assert.fail("expected an IllegalTransitionError");
}

describe("job lifecycle: statuses", () => {
  it("when a status is done, failed or canceled, then it is terminal; queued and processing are not", () => {
    assert.deepEqual([...TERMINAL_STATUSES].sort(), ["canceled", "done", "failed"]);
    const all: JobStatus[] = ["queued", "processing", "done", "failed", "canceled"];
    assert.deepEqual(all.map(isTerminal), [false, false, true, true, true]);
  });

  it("when a terminal job is asked to move anywhere, then no transition is allowed", () => {
    for (const from of TERMINAL_STATUSES) {
      for (const to of ["queued", "processing", "done", "failed", "canceled"] as const) assert.equal(canTransition(from, to), false, `${from} → ${to}`);
    }
  });

  it("when a transition is refused, then the error names both statuses in its message", () => {
    const error = illegal(() => startJob(done(), T2));
    assert.equal(error.from, "done");
    assert.equal(error.to, "processing");
    assert.equal(error.message, "a job cannot go from done to processing");
    assert.ok(error instanceof Error);
  });
});

describe("job lifecycle: starting and leases", () => {
  it("when a queued job starts without a lease, then it is processing since that time and nobody holds it", () => {
    const started = startJob(queued, T0);
    assert.equal(started.status, "processing");
    assert.equal(started.startedAt, T0);
    assert.equal(started.leaseOwner, undefined);
    assert.equal(started.leaseExpiresAt, undefined);
    assert.equal(started.id, "job-1");
    assert.equal(started.reserved, 5n);
    assert.equal(queued.status, "queued", "the original job is left as it was");
  });

  it("when a queued job starts with a lease, then the worker holds it until the lease's end", () => {
    const started = startJob(queued, T0, LEASE);
    assert.equal(started.leaseOwner, "worker-1");
    assert.equal(started.leaseExpiresAt, LEASE.expiresAt);
  });

  it("when a job that is already processing is started again, then it is refused", () => {
    const error = illegal(() => startJob(processing(), T1));
    assert.deepEqual([error.from, error.to], ["processing", "processing"]);
  });

  it("when another worker takes over a processing job, then it holds the lease and the job keeps its status and start", () => {
    const lease = { owner: "worker-2", expiresAt: new Date(90_000) };
    const taken = takeOverJob(processing(), lease);
    assert.equal(taken.status, "processing");
    assert.equal(taken.startedAt, T0);
    assert.equal(taken.leaseOwner, "worker-2");
    assert.equal(taken.leaseExpiresAt, lease.expiresAt);
  });

  it("when a job that is not processing is taken over, then it is refused as a move to processing", () => {
    for (const [job, from] of [[queued, "queued"], [done(), "done"], [failed(), "failed"]] as const) {
      const error = illegal(() => takeOverJob(job, LEASE));
      assert.deepEqual([error.from, error.to], [from, "processing"]);
      assert.equal(error.message, `a job cannot go from ${from} to processing`);
    }
  });

  it("when the lease's end is reached exactly, then it has not expired; one millisecond later, it has", () => {
    const job = processing();
    const end = LEASE.expiresAt.getTime();
    assert.equal(leaseExpired(job, new Date(end - 1)), false);
    assert.equal(leaseExpired(job, new Date(end)), false);
    assert.equal(leaseExpired(job, new Date(end + 1)), true);
  });

  it("when a processing job has no lease, then it counts as expired; a job that is not processing never does", () => {
    assert.equal(leaseExpired(startJob(queued, T0), T0), true);
    assert.equal(leaseExpired(queued, new Date(10 ** 12)), false);
    assert.equal(leaseExpired({ ...done(), leaseExpiresAt: new Date(0) }, T2), false);
    assert.equal(leaseExpired({ ...failed(), leaseExpiresAt: new Date(0) }, T2), false);
  });
});

describe("job lifecycle: outcomes", () => {
  it("when a processing job completes, then it is done with its result, charge and usage, and the lease is released", () => {
    const job = done();
    assert.equal(job.status, "done");
    assert.equal(job.startedAt, T0);
    assert.equal(job.finishedAt, T1);
    assert.deepEqual(job.result, { text: "answer", blobKey: "b", mimeType: "text/plain" });
    assert.equal(job.charged, 4n);
    assert.deepEqual(job.usage, { promptTokens: 1, textOutputTokens: 2, videoOutputTokens: 0 });
    assert.equal(job.leaseOwner, undefined);
    assert.equal(job.leaseExpiresAt, undefined);
  });

  it("when a queued job is completed without starting, then it is refused", () => {
    const error = illegal(() => completeJob(queued, T1, {}, 1n));
    assert.deepEqual([error.from, error.to], ["queued", "done"]);
  });

  it("when a job fails, then it records why, charges nothing and releases the lease", () => {
    const job = failJob({ ...processing(), charged: 3n }, T1, "upstream_error", "the upstream broke");
    assert.equal(job.status, "failed");
    assert.equal(job.finishedAt, T1);
    assert.equal(job.error, "upstream_error");
    assert.equal(job.errorMessage, "the upstream broke");
    assert.equal(job.charged, 0n);
    assert.equal(job.leaseOwner, undefined);
    assert.equal(job.leaseExpiresAt, undefined);
  });

  it("when a queued job's inputs are missing, then it may fail before it starts", () => {
    assert.equal(failJob(queued, T1, "missing_input_images", "gone").status, "failed");
  });

  it("when a finished job fails again, then it is refused", () => {
    const error = illegal(() => failJob(failed(), T2, "x", "y"));
    assert.deepEqual([error.from, error.to], ["failed", "failed"]);
  });
});

describe("job lifecycle: settlement and what clients see", () => {
  it("when a finished job is settled, then it is marked settled and keeps its outcome", () => {
    const settled = settleJob(done());
    assert.equal(settled.settled, true);
    assert.equal(settled.status, "done");
    assert.equal(settleJob(failed()).settled, true);
  });

  it("when a job that is not finished is settled, then it is refused, naming the job and its status", () => {
    assert.throws(() => settleJob(queued), { message: "job job-1 is queued: only a finished job is settled" });
    assert.throws(() => settleJob(processing()), { message: "job job-1 is processing: only a finished job is settled" });
  });

  it("when a job is done but its money has not moved, then clients see it processing, with no outcome and nothing charged", () => {
    const shown = publicState(done());
    assert.equal(shown.status, "processing");
    assert.equal(shown.finishedAt, undefined);
    assert.equal(shown.result, undefined);
    assert.equal(shown.charged, 0n);
    assert.equal(shown.startedAt, T0);
    assert.equal(shown.reserved, 5n);
  });

  it("when a job failed but its money has not moved, then clients see it processing, without the error", () => {
    const shown = publicState(failed());
    assert.equal(shown.status, "processing");
    assert.equal(shown.error, undefined);
    assert.equal(shown.errorMessage, undefined);
    assert.equal(shown.finishedAt, undefined);
  });

  it("when a job is settled, or not finished yet, then clients see it exactly as stored", () => {
    for (const job of [queued, processing(), settleJob(done()), settleJob(failed())]) assert.equal(publicState(job), job);
    const settled = settleJob(done());
    assert.equal(publicState(settled).status, "done");
    assert.equal(publicState(settled).charged, 4n);
  });
});

describe("job lifecycle: webhooks", () => {
  it("when a job is done, then the webhook says success with its image URL, text and metadata", () => {
    const job = { ...done(), metadata: { order: 7 } };
    assert.deepEqual(webhookPayload(job, "https://files.example/a.png"), {
      job_id: "job-1", metadata: { order: 7 }, status: "success", result: { image_url: "https://files.example/a.png", text: "answer" },
    });
  });

  it("when a done job has no image, text or metadata, then those are null", () => {
    const job = completeJob(processing(), T1, {}, 1n);
    assert.deepEqual(webhookPayload(job, undefined), {
      job_id: "job-1", metadata: null, status: "success", result: { image_url: null, text: null },
    });
    assert.deepEqual(webhookPayload({ ...job, result: undefined }, undefined).result, { image_url: null, text: null });
  });

  it("when a job failed, then the webhook says failed with its error, or generation_failed when none was recorded", () => {
    assert.deepEqual(webhookPayload(failed(), undefined), { job_id: "job-1", metadata: null, status: "failed", error: "upstream_error" });
    assert.equal(webhookPayload({ ...failed(), error: undefined }, undefined).error, "generation_failed");
  });

  it("when a job is not finished, then it has no webhook", () => {
    assert.throws(() => webhookPayload(processing(), undefined), { message: "job job-1 is processing: only finished jobs have a webhook" });
    assert.throws(() => webhookPayload(queued, undefined), /job job-1 is queued/);
  });

  it("when a webhook is retried, then its message id stays the same; another outcome has another id", () => {
    assert.equal(webhookMessageId(done()), "msg_job-1_done");
    assert.equal(webhookMessageId(failed()), "msg_job-1_failed");
  });
});

describe("fair queue: lines that emptied", () => {
  it("when every account's line has emptied and a new account adds an item, then that item is next", () => {
    const queue = new FairQueue();
    queue.push("a", "a1");
    queue.push("b", "b1");
    assert.deepEqual([queue.shift(), queue.shift(), queue.shift()], ["a1", "b1", undefined]);
    queue.push("c", "c1");
    assert.equal(queue.size, 1);
    assert.equal(queue.shift(), "c1");
    assert.equal(queue.size, 0);
  });
});

describe("job lifecycle: cancellation", () => {
  const usage = { promptTokens: 3, textOutputTokens: 7, videoOutputTokens: 0 };

  it("when a queued job is canceled, then it is canceled at that time, charged nothing, and never started", () => {
    const canceled = cancelJob(queued, T1);
    assert.equal(canceled.status, "canceled");
    assert.equal(canceled.finishedAt, T1);
    assert.equal(canceled.charged, 0n);
    assert.equal(canceled.startedAt, undefined);
    assert.equal(canceled.reserved, 5n);
    assert.equal(queued.status, "queued", "the original job is left as it was");
  });

  it("when a processing text job is canceled with what it produced, then it is charged that and keeps that usage, and its lease ends", () => {
    const canceled = cancelJob(processing(), T1, 3n, usage);
    assert.equal(canceled.charged, 3n);
    assert.deepEqual(canceled.usage, usage);
    assert.equal(canceled.leaseOwner, undefined);
    assert.equal(canceled.leaseExpiresAt, undefined);
    assert.equal(canceled.startedAt, T0);
    assert.equal(canceled.result, undefined);
    assert.equal(canceled.error, undefined);
    assert.equal(canceled.errorMessage, undefined);
  });

  it("when a processing job is canceled without usage, then the usage it had stays", () => {
    const withUsage: Job = { ...processing(), usage };
    assert.deepEqual(cancelJob(withUsage, T1).usage, usage);
    assert.equal(cancelJob(processing(), T1).usage, undefined);
  });

  it("when an image or video job is canceled with a charge, then it is refused: it produced no result", () => {
    for (const kind of ["image", "video"] as const) {
      const media: Job = { ...processing(), kind };
      assert.throws(() => cancelJob(media, T1, 1n), /produced no result and is charged nothing/);
      assert.equal(cancelJob(media, T1, 0n).charged, 0n);
    }
    const realtime: Job = { ...processing(), kind: "multimodal_realtime" };
    assert.equal(cancelJob(realtime, T1, 2n).charged, 2n);
  });

  it("when a cancellation is asked to charge a negative amount, then it is refused", () => {
    assert.throws(() => cancelJob(processing(), T1, -1n), /cannot charge -1/);
  });

  it("when a finished job is canceled, then it is refused as an illegal transition", () => {
    for (const finished of [done(), failed(), cancelJob(queued, T1)]) {
      const error = illegal(() => cancelJob(finished, T2));
      assert.deepEqual([error.from, error.to], [finished.status, "canceled"]);
    }
  });

  it("when a job ends, then done and a canceled job with a charge settle their hold; failed and a free cancellation release it", () => {
    assert.equal(chargesOnFinish(done()), true);
    assert.equal(chargesOnFinish(failed()), false);
    assert.equal(chargesOnFinish(cancelJob(queued, T1)), false);
    assert.equal(chargesOnFinish(cancelJob(processing(), T1, 1n)), true);
    assert.equal(chargesOnFinish(cancelJob(processing(), T1, 0n)), false);
    assert.throws(() => chargesOnFinish(processing()), /only a finished job moves money/);
    assert.throws(() => chargesOnFinish(queued), /only a finished job moves money/);
  });

  it("when a canceled job is settled and shown, then it shows canceled with its charge", () => {
    const canceled = cancelJob(processing(), T1, 3n, usage);
    assert.equal(publicState(canceled).status, "processing", "not settled yet: still processing to clients");
    const settled = settleJob(canceled, 2n);
    assert.equal(publicState(settled).status, "canceled");
    assert.equal(publicState(settled).charged, 2n);
  });

  it("when a canceled job's webhook is built, then it says canceled with the metadata and no result or error", () => {
    const canceled = { ...cancelJob(queued, T1), metadata: { order: 7 } };
    assert.deepEqual(webhookPayload(canceled, undefined), { job_id: "job-1", status: "canceled", metadata: { order: 7 } });
    assert.deepEqual(webhookPayload(cancelJob(queued, T1), "http://x"), { job_id: "job-1", status: "canceled", metadata: null });
    assert.equal(webhookMessageId(canceled), "msg_job-1_canceled");
  });
});
