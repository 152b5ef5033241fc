/**
 * The listing contract of JobStore.listByAccount, shared by every adapter's
 * tests (memory and SQLite in sqlite-stores.test.ts, Cassandra in
 * cassandra-stores.test.ts): newest first by (createdAt, id), filters, strict
 * bounds, the cursor, pages that end when nothing more matches, other
 * accounts never listed, the status as clients see it.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { completeJob, failJob, settleJob, startJob } from "../../src/domain/jobs/job-state-machine.js";
import type { Job } from "../../src/domain/jobs/job.js";
import { compareNewestFirst, type JobListQuery } from "../../src/domain/jobs/job-list.js";
import type { JobStore } from "../../src/ports/job-store.js";

const DAY = 86_400_000;

function listedJob(accountId: string, createdAt: Date, overrides: Partial<Job> = {}): Job {
  return {
    id: randomUUID(),
    accountId,
    model: "aimodel-3-pro-image",
    kind: "image",
    status: "queued",
    input: { prompt: "a lighthouse", inputImageUrls: [], inputBlobKeys: [], resolution: "2K" },
    createdAt,
    timeoutSeconds: 60,
    reservationId: `job:${randomUUID()}`,
    reserved: 134_000_000_000n,
    charged: 0n,
    ...overrides,
  };
}

/** Moves a stored queued job to done (settled or not) or failed (settled), as the worker does. */
async function finish(store: JobStore, job: Job, outcome: "done" | "failed" | "decided"): Promise<Job> {
  const started = startJob(job, new Date(job.createdAt.getTime() + 1), { owner: "w", expiresAt: new Date(Date.now() + 60_000) });
  assert.equal(await store.transition(started, { status: "queued" }), true);
  const ended = outcome === "failed" ? failJob(started, new Date(), "generation_failed", "no") : completeJob(started, new Date(), { text: "t" }, 1n);
  const next = outcome === "decided" ? ended : settleJob(ended);
  assert.equal(await store.transition(next, { status: "processing", leaseOwner: "w" }), true);
  return next;
}

/** Every page of a query, following `next`. */
async function pages(store: JobStore, query: JobListQuery): Promise<string[][]> {
  const result: string[][] = [];
  let after = query.after;
  for (let guard = 0; guard < 1000; guard++) {
    const page = await store.listByAccount({ ...query, after });
    result.push(page.jobs.map((job) => job.id));
    if (page.next === undefined) return result;
    after = page.next;
  }
  throw new Error("the listing never ended");
}

const newestFirst = (jobs: Job[]) => [...jobs].sort((a, b) => compareNewestFirst({ createdAt: a.createdAt, jobId: a.id }, { createdAt: b.createdAt, jobId: b.id }));

/**
 * The contract, as one test body. `makeStore` gives a store with no jobs of
 * the accounts used here (fresh ids each run).
 */
export async function jobListContract(store: JobStore): Promise<void> {
  const account = `acct-${randomUUID()}`;
  const other = `acct-${randomUUID()}`;
  // Jobs over three UTC days (a Cassandra bucket each), two of them at the same instant (the id decides).
  const base = Date.UTC(2026, 10, 20, 23, 59, 59, 0);
  const times = [base - 2 * DAY, base - DAY + 500, base, base, base + 1, base + 2, base + DAY + 5, base + DAY + 6];
  const jobs: Job[] = [];
  for (const [i, ms] of times.entries()) {
    const job = listedJob(account, new Date(ms), i === 3 ? { model: "aimodel-3.5-flash", kind: "text" } : {});
    await store.registerIntent(job.id, account, job.createdAt);
    await store.create(job);
    jobs.push(job);
  }
  // Another account's jobs at the same instants never appear.
  for (const ms of times) await store.create(listedJob(other, new Date(ms)));
  // Statuses: one done and settled, one failed, one decided but not settled (clients see processing).
  jobs[1] = await finish(store, jobs[1]!, "done");
  jobs[2] = await finish(store, jobs[2]!, "failed");
  jobs[5] = await finish(store, jobs[5]!, "decided");

  const expected = newestFirst(jobs).map((job) => job.id);
  const all = await store.listByAccount({ accountId: account, limit: 100 });
  assert.deepEqual(all.jobs.map((job) => job.id), expected, "newest first, the greater id first at the same instant");
  assert.equal(all.next, undefined);
  const stored = all.jobs.find((job) => job.id === jobs[1]!.id)!;
  assert.equal(stored.status, "done");
  assert.equal(stored.accountId, account);
  assert.equal(stored.createdAt.getTime(), jobs[1]!.createdAt.getTime());

  // Pages of every size give the same sequence, each at most `limit`, the last one ending the listing.
  for (const limit of [1, 2, 3, 7, 8, 9]) {
    const paged = await pages(store, { accountId: account, limit });
    assert.deepEqual(paged.flat(), expected, `pages of ${limit}`);
    for (const page of paged) assert.ok(page.length <= limit);
    if (limit >= expected.length) assert.equal(paged.length, 1, "a page holding the last job ends the listing");
  }

  const ids = async (query: Partial<JobListQuery>) => (await pages(store, { accountId: account, limit: 3, ...query })).flat();
  assert.deepEqual(await ids({ status: "done" }), [jobs[1]!.id]);
  assert.deepEqual(await ids({ status: "failed" }), [jobs[2]!.id]);
  assert.deepEqual(await ids({ status: "processing" }), [jobs[5]!.id], "decided but not settled is processing");
  assert.deepEqual(new Set(await ids({ status: "queued" })), new Set([0, 3, 4, 6, 7].map((i) => jobs[i]!.id)));
  assert.deepEqual(await ids({ model: "aimodel-3.5-flash" }), [jobs[3]!.id]);
  assert.deepEqual(await ids({ model: "aimodel-3.5-flash", status: "done" }), []);
  // Strict bounds, across days.
  assert.deepEqual(await ids({ createdAfter: new Date(base), createdBefore: new Date(base + DAY + 6) }), newestFirst([jobs[4]!, jobs[5]!, jobs[6]!]).map((job) => job.id));
  assert.deepEqual(await ids({ createdBefore: new Date(base) }), newestFirst([jobs[0]!, jobs[1]!]).map((job) => job.id));
  assert.deepEqual(await ids({ createdAfter: new Date(base + 2) }), newestFirst([jobs[6]!, jobs[7]!]).map((job) => job.id));
  assert.deepEqual(await ids({ createdAfter: new Date(base + 10 * DAY) }), []);
  // The cursor: strictly below it, even at the same instant.
  const [laterTwin, earlierTwin] = newestFirst([jobs[2]!, jobs[3]!]);
  const below = await store.listByAccount({ accountId: account, limit: 100, after: { createdAt: laterTwin!.createdAt, jobId: laterTwin!.id } });
  assert.deepEqual(below.jobs.map((job) => job.id), expected.slice(expected.indexOf(earlierTwin!.id)));
  // A job created after paging began (newer than the cursor) never shifts a later page.
  const first = await store.listByAccount({ accountId: account, limit: 3 });
  await store.create(listedJob(account, new Date(base + 3 * DAY)));
  const rest = await pages(store, { accountId: account, limit: 3, after: first.next });
  assert.deepEqual([...first.jobs.map((job) => job.id), ...rest.flat()], expected);
  // An account without jobs.
  assert.deepEqual(await store.listByAccount({ accountId: `acct-${randomUUID()}`, limit: 20 }), { jobs: [], next: undefined });
}
