// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { jobView } from "../../src/core/jobs/job-view.js";
import { settleHold } from "../../src/core/money/holds.js";
import { createGenerationWorker } from "../../src/core/workers/generation-worker.js";
import { completeJob, startJob } from "../../src/domain/jobs/job-state-machine.js";
import { formatMoney } from "../../src/domain/money.js";
import { openWorkerBed, type EmbeddedStore, type WorkerBed } from "./worker-bed.js";

/*
 * A worker that finished a job settles its hold, then marks the job settled
 * with what the ledger charged (less than the usage cost when hold +
 * available could not cover it). A crash between the two leaves the job done
 * but unsettled, and the reaper repeats the finalization: the repeated settle
 * moves nothing, and the job must show the capped charge the ledger recorded,
 * not the uncapped cost it asked for. Through the real ledger and job store
 * (memory and SQLite; the same ledger rule on Cassandra is in
 * test/adapters/ledger-bounds.test.ts).
 */

for (const store of ["memory", "sqlite"] as EmbeddedStore[]) {
  describe(`finalization repeated by the reaper (${store} store)`, () => {
    let bed: WorkerBed;
    before(async () => {
      bed = await openWorkerBed(store);
    });
    after(() => bed.close());

    it("when the reaper repeats the finalization of a job whose capped settlement was recorded before a crash, then the job shows the capped charge and the shortfall is reported once", async () => {
      const { deps } = bed;
      const balance = 10_000_000_000_000n; // $10
      const job = await bed.acceptTextJob(balance);
      // Another hold takes all but 1 000 picodollars of what is left: this job may be charged its hold + 1 000.
      const otherHold = balance - job.reserved - 1_000n;
      assert.equal(await deps.ledger.reserve(job.accountId, "job:another", otherHold), "reserved");
      const ceiling = job.reserved + 1_000n;
      // The upstream reported usage costing more than that.
      const usageCost = ceiling + 123_456n;
      const started = startJob(job, deps.clock.now(), { owner: "crashed-worker", expiresAt: new Date(Date.now() + 60_000) });
      assert.ok(await deps.jobs.transition(started, { status: "queued" }));
      const done = completeJob(started, deps.clock.now(), { text: "an answer" }, usageCost, {
        promptTokens: 10, textOutputTokens: 10, videoOutputTokens: 0,
      });
      assert.ok(await deps.jobs.transition(done, { status: "processing", leaseOwner: "crashed-worker" }));
      // The crashed worker's finalization got as far as the settlement, through the one home of holds.
      const capped = await settleHold(deps, job.accountId, job.id, usageCost);
      assert.equal(capped, ceiling, "charged hold + available, not the usage cost");
      const reports = () => bed.logged.filter((line) => line.msg.includes("billing shortfall") && line.account_id === job.accountId);
      assert.equal(reports().length, 1);

      const worker = createGenerationWorker(deps, bed.workerOptions("reaper-worker"));
      await worker.reap();
      await worker.stop(0);

      const stored = (await deps.jobs.get(job.id))!;
      assert.equal(stored.settled, true, "the reaper finalized the job");
      assert.equal(stored.charged, ceiling, `the job shows the ${formatMoney(ceiling)} charged, not the ${formatMoney(usageCost)} asked`);
      const view = jobView(stored, deps.settingsOf, deps.clock.now());
      assert.equal(view.usage?.charged, formatMoney(ceiling));
      assert.deepEqual(await deps.ledger.balance(job.accountId), { balance: balance - ceiling, reserved: otherHold }, "the repeat moved no money");
      assert.equal(reports().length, 1, "the repeated settlement reports no second shortfall");
      const shortfalls = await deps.ledger.shortfalls(job.accountId);
      assert.deepEqual(shortfalls, [{ reservationId: job.reservationId, amount: usageCost - ceiling }]);
    });

    it("when the reaper repeats the finalization of a job settled in full before a crash, then the job shows what was charged and no money moves", async () => {
      const { deps } = bed;
      const job = await bed.acceptTextJob(10_000_000_000_000n);
      const cost = job.reserved / 2n;
      const started = startJob(job, deps.clock.now(), { owner: "crashed-worker", expiresAt: new Date(Date.now() + 60_000) });
      assert.ok(await deps.jobs.transition(started, { status: "queued" }));
      const done = completeJob(started, deps.clock.now(), { text: "an answer" }, cost, { promptTokens: 1, textOutputTokens: 1, videoOutputTokens: 0 });
      assert.ok(await deps.jobs.transition(done, { status: "processing", leaseOwner: "crashed-worker" }));
      assert.equal(await settleHold(deps, job.accountId, job.id, cost), cost);
      const after = await deps.ledger.balance(job.accountId);

      const worker = createGenerationWorker(deps, bed.workerOptions("reaper-worker"));
      await worker.reap();
      await worker.stop(0);

      const stored = (await deps.jobs.get(job.id))!;
      assert.equal(stored.settled, true);
      assert.equal(stored.charged, cost);
      assert.deepEqual(await deps.ledger.balance(job.accountId), after);
      assert.deepEqual(after, { balance: 10_000_000_000_000n - cost, reserved: 0n });
    });
  });
}
