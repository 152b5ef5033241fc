// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { GenerationRequested } from "../../src/core/jobs/accept-job.js";
import { createGenerationWorker } from "../../src/core/workers/generation-worker.js";
import type { Job } from "../../src/domain/jobs/job.js";
import { TOPICS } from "../../src/ports/event-bus.js";
import type { JobStore } from "../../src/ports/job-store.js";
import { eventually } from "../support/eventually.js";
import { openWorkerBed, type WorkerBed } from "./worker-bed.js";

/*
 * A worker takes an announced job out of its fair queue (`waiting`) and
 * claims it: it reads the job, then moves it queued → processing by
 * compare-and-set. stop() may come while that claim is under way; the job
 * must then neither be lost (still queued, its announcement consumed, nobody
 * to run it) nor run by a worker that has stopped. Real SQLite store and the
 * durable embedded bus; the only thing added is a gate on one store call, so
 * the moment is chosen by the test and not by timing.
 */

const GROUP = "generation-workers";

/** A promise the test opens, and one that tells when the gated call arrived. */
function gate() {
  let open!: () => void;
  let arrived!: () => void;
  return {
    opened: new Promise<void>((resolve) => (open = resolve)),
    reached: new Promise<void>((resolve) => (arrived = resolve)),
    open: () => open(),
    arrive: () => arrived(),
  };
}

/** The store with one call held at the gate: the `nth` get of `jobId`, or the claim's compare-and-set (queued → processing). */
function gatedStore(jobs: JobStore, hold: { jobId: () => string | undefined; call: "get"; nth: number } | { jobId: () => string | undefined; call: "claim" }, g: ReturnType<typeof gate>): JobStore {
  let gets = 0;
  let held = false;
  return new Proxy(jobs, {
    get(target, property, receiver) {
      if (property === "get" && hold.call === "get") {
        return async (jobId: string) => {
          if (jobId === hold.jobId() && ++gets === hold.nth && !held) {
            held = true;
            g.arrive();
            await g.opened;
          }
          return target.get(jobId);
        };
      }
      if (property === "transition" && hold.call === "claim") {
        return async (next: Job, expected: Parameters<JobStore["transition"]>[1]) => {
          if (next.id === hold.jobId() && expected.status === "queued" && !held) {
            held = true;
            g.arrive();
            await g.opened;
          }
          return target.transition(next, expected);
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** The job once it is finished and settled (polled with a deadline). */
async function finished(bed: WorkerBed, jobId: string, timeoutMs = 10_000): Promise<Job> {
  const job = await eventually(() => bed.deps.jobs.get(jobId), (found) => Boolean(found?.settled), { timeoutMs, what: `job ${jobId} to be finished and settled` });
  return job!;
}

describe("a worker stopping while it claims a job (SQLite store, durable embedded bus)", () => {
  let bed: WorkerBed;
  before(async () => {
    bed = await openWorkerBed("sqlite");
  });
  after(() => bed.close());

  it("when stop() comes while the claim is reading the job, then the job is announced again and the next worker processes it", async () => {
    const { deps } = bed;
    let jobId: string | undefined;
    const g = gate();
    // The worker reads the job once when the announcement arrives, and again when it claims it: hold the second.
    const first = createGenerationWorker({ ...deps, jobs: gatedStore(deps.jobs, { jobId: () => jobId, call: "get", nth: 2 }, g) }, bed.workerOptions("first"));
    const subscription = await deps.bus.subscribe<GenerationRequested>(TOPICS.generationRequested, GROUP, first.handle);
    const job = await bed.acceptTextJob(10_000_000_000_000n);
    jobId = job.id;
    await g.reached; // the job left the fair queue; its claim is under way

    // As the runtime stops: consumers first, then the worker.
    await subscription.close();
    const stopping = first.stop(5_000);
    g.open();
    await stopping;
    assert.equal((await deps.jobs.get(job.id))?.status, "queued", "the stopped worker did not run it");

    const next = createGenerationWorker(deps, bed.workerOptions("next"));
    const nextSubscription = await deps.bus.subscribe<GenerationRequested>(TOPICS.generationRequested, GROUP, next.handle);
    try {
      const done = await finished(bed, job.id);
      assert.equal(done.status, "done", `${done.status}: ${done.errorMessage ?? ""}`);
      assert.equal(done.leaseOwner, undefined);
      assert.deepEqual(await deps.ledger.balance(job.accountId), { balance: 10_000_000_000_000n - done.charged, reserved: 0n });
    } finally {
      await nextSubscription.close();
      await next.stop(5_000);
    }
  });

  it("when stop() comes while the claim's compare-and-set is under way, then the claimed job runs within the grace and stop() returns with it finished", async () => {
    const { deps } = bed;
    let jobId: string | undefined;
    const g = gate();
    const first = createGenerationWorker({ ...deps, jobs: gatedStore(deps.jobs, { jobId: () => jobId, call: "claim" }, g) }, bed.workerOptions("first-cas"));
    const subscription = await deps.bus.subscribe<GenerationRequested>(TOPICS.generationRequested, GROUP, first.handle);
    const job = await bed.acceptTextJob(10_000_000_000_000n);
    jobId = job.id;
    await g.reached;

    await subscription.close();
    const stopping = first.stop(10_000);
    g.open();
    await stopping;
    const stored = (await deps.jobs.get(job.id))!;
    assert.equal(stored.status, "done", `when stop() returned the job was ${stored.status}, held by ${stored.leaseOwner}`);
    assert.equal(stored.settled, true);
    assert.deepEqual(await deps.ledger.balance(job.accountId), { balance: 10_000_000_000_000n - stored.charged, reserved: 0n });
  });
});
