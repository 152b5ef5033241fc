// backends: embedded
import { after, afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { context, propagation, trace } from "@opentelemetry/api";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { join } from "node:path";
import { MemoryIdempotencyStore } from "../../src/adapters/memory/memory-idempotency-store.js";
import { MemoryJobStore } from "../../src/adapters/memory/memory-job-store.js";
import { openSqliteStores, type SqliteStores } from "../../src/adapters/sqlite/sqlite-stores.js";
import { SqliteIdempotencyStore } from "../../src/adapters/sqlite/sqlite-idempotency-store.js";
import { mapSqliteError } from "../../src/adapters/sqlite/sqlite-errors.js";
import { completeJob, failJob, settleJob, startJob } from "../../src/domain/jobs/job-state-machine.js";
import type { Job } from "../../src/domain/jobs/job.js";
import { parsePriceTable, type PriceTable } from "../../src/domain/pricing/price-table.js";
import { DependencyUnavailableError } from "../../src/ports/dependency.js";
import type { IdempotencyStore } from "../../src/ports/idempotency-store.js";
import type { JobStore } from "../../src/ports/job-store.js";
import { jobListContract } from "./job-list-contract.js";
import { apiKeyChangeContract, apiKeyListingContract } from "./api-key-contract.js";
import { deliveryListingContract } from "./delivery-contract.js";
import { panelSessionContract } from "./panel-session-contract.js";
import { MemoryPanelSessionStore } from "../../src/adapters/memory/memory-panel-session-store.js";
import { MemoryDeliveryLog } from "../../src/adapters/memory/memory-delivery-log.js";
import { MemoryApiKeyStore } from "../../src/adapters/memory/memory-api-key-store.js";
import { randomUUID } from "node:crypto";
import { openSqliteDatabase } from "../../src/adapters/sqlite/sqlite-database.js";
import { encodeBody } from "../../src/adapters/shared/job-codec.js";
import { eventually } from "../support/eventually.js";
import { REPO_ROOT } from "../support/repo.js";

const PRICES: PriceTable = parsePriceTable({
  "aimodel-3-pro-image": { per_image: { "1K": "0.134", "2K": "0.134", "4K": "0.24" } },
  "aimodel-3.5-flash": { input_per_million_tokens: "0.30", output_per_million_tokens: "2.50" },
});

const directories: string[] = [];
const opened: SqliteStores[] = [];

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "sqlite-stores-"));
  directories.push(dir);
  return dir;
}

async function open(dataDir: string, overrides: { defaultPrices?: PriceTable; busyTimeoutMs?: number } = {}): Promise<SqliteStores> {
  const stores = await openSqliteStores({ dataDir, synchronous: "full", defaultPrices: PRICES, ...overrides });
  opened.push(stores);
  return stores;
}

afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
});
after(() => {
  for (const dir of directories) rmSync(dir, { recursive: true, force: true });
});

/** A job without its undefined fields (a decoded job spells them out). */
const defined = (job: Job | undefined) => job && Object.fromEntries(Object.entries(job).filter(([, value]) => value !== undefined));

let jobCounter = 0;
function aJob(overrides: Partial<Job> = {}): Job {
  jobCounter++;
  return {
    id: `00000000-0000-4000-8000-${String(jobCounter).padStart(12, "0")}`,
    accountId: "acct",
    model: "aimodel-3-pro-image",
    kind: "image",
    status: "queued",
    input: { prompt: "a lighthouse", inputImageUrls: [], inputBlobKeys: [], resolution: "2K" },
    createdAt: new Date("2025-01-02T03:04:05.678Z"),
    timeoutSeconds: 60,
    reservationId: `job:${jobCounter}`,
    reserved: 134_000_000_000n,
    charged: 0n,
    ...overrides,
  };
}

describe("SqliteLedger", () => {
  it("when 200 reservations race for funds covering 50, then exactly 50 are held and the account is never overdrawn", async () => {
    const { stores } = await open(freshDir());
    await stores.ledger.createAccount("hot", "hot", 50n);
    const outcomes = await Promise.all(Array.from({ length: 200 }, (_, i) => stores.ledger.reserve("hot", `r-${i}`, 1n)));
    assert.equal(outcomes.filter((o) => o === "reserved").length, 50);
    assert.equal(outcomes.filter((o) => o === "insufficient_funds").length, 150);
    assert.deepEqual(await stores.ledger.balance("hot"), { balance: 50n, reserved: 50n });
  });

  it("when a reservation is settled or released twice, then money moves once", async () => {
    const { stores, database } = await open(freshDir());
    const { ledger } = stores;
    await ledger.createAccount("a", "a", 1_000n);
    assert.equal(await ledger.reserve("a", "r1", 300n), "reserved");
    assert.equal(await ledger.reserve("a", "r1", 300n), "reserved"); // the same id again holds nothing more
    assert.deepEqual(await ledger.balance("a"), { balance: 1_000n, reserved: 300n });
    await ledger.settle("a", "r1", 250n);
    await ledger.settle("a", "r1", 250n);
    await ledger.release("a", "r1");
    assert.deepEqual(await ledger.balance("a"), { balance: 750n, reserved: 0n });

    assert.equal(await ledger.reserve("a", "r2", 700n), "reserved");
    await ledger.release("a", "r2");
    await ledger.release("a", "r2");
    await ledger.settle("a", "r2", 700n);
    assert.deepEqual(await ledger.balance("a"), { balance: 750n, reserved: 0n });

    const holds = database.db.prepare("SELECT reservation_id, amount, state, charged FROM holds ORDER BY reservation_id").all();
    assert.deepEqual(holds, [
      { reservation_id: "r1", amount: "300", state: "settled", charged: "250" },
      { reservation_id: "r2", amount: "700", state: "released", charged: null },
    ]);
    // One entry per movement, none for the repeats: credit, hold, charge, hold, release.
    const entries = database.db.prepare("SELECT kind, amount, balance_after, reserved_change, reserved_after FROM ledger_entries ORDER BY entry_id").all();
    assert.deepEqual(entries, [
      { kind: "credit", amount: "1000", balance_after: "1000", reserved_change: "0", reserved_after: "0" },
      { kind: "hold", amount: "0", balance_after: "1000", reserved_change: "300", reserved_after: "300" },
      { kind: "charge", amount: "-250", balance_after: "750", reserved_change: "-300", reserved_after: "0" },
      { kind: "hold", amount: "0", balance_after: "750", reserved_change: "700", reserved_after: "700" },
      { kind: "release", amount: "0", balance_after: "750", reserved_change: "-700", reserved_after: "0" },
    ]);
  });

  it("when amounts exceed 64 bits, then they survive a reopen exactly", async () => {
    const dir = freshDir();
    const huge = 123_456_789_012_345_678_901_234_567_890n; // far beyond any SQLite INTEGER
    const first = await open(dir);
    await first.stores.ledger.createAccount("rich", "rich", huge);
    await first.stores.ledger.credit("rich", 1n);
    assert.equal(await first.stores.ledger.reserve("rich", "big", huge - 7n), "reserved");
    await first.stores.ledger.settle("rich", "big", huge - 9n);
    await first.close();

    const second = await open(dir);
    assert.deepEqual(await second.stores.ledger.balance("rich"), { balance: 10n, reserved: 0n });
    const stored = second.database.db.prepare("SELECT typeof(balance) AS type, balance FROM accounts").get();
    assert.deepEqual(stored, { type: "text", balance: "10" });
  });

  it("when an account is unknown, exists already or lacks funds, then the ledger says so and changes nothing", async () => {
    const { stores } = await open(freshDir());
    const { ledger } = stores;
    assert.equal(await ledger.hasAnyAccount(), false);
    assert.equal(await ledger.reserve("nobody", "r", 1n), "unknown_account");
    assert.equal(await ledger.credit("nobody", 1n), undefined);
    assert.equal(await ledger.balance("nobody"), undefined);
    await ledger.createAccount("a", "a", 10n);
    assert.equal(await ledger.hasAnyAccount(), true);
    await assert.rejects(ledger.createAccount("a", "again", 99n), /exists/);
    assert.equal(await ledger.reserve("a", "r", 11n), "insufficient_funds");
    assert.deepEqual(await ledger.credit("a", 5n), { balance: 15n, reserved: 0n });
    assert.deepEqual(await ledger.balance("a"), { balance: 15n, reserved: 0n });
  });
});

/** The job store contract, run against the SQLite store and the memory store alike. */
const jobStores: [string, () => Promise<JobStore>][] = [
  ["SqliteJobStore", async () => (await open(freshDir())).stores.jobs],
  ["MemoryJobStore", async () => new MemoryJobStore()],
];

for (const [name, makeStore] of jobStores) {
  describe(name, () => {
    it("when a job moves, then only the expected status (and lease owner, when given) lets it", async () => {
      const store = await makeStore();
      const job = aJob({ metadata: { order: 7 }, callbackUrl: "https://example.test/hook" });
      await store.registerIntent(job.id, job.accountId, job.createdAt);
      await store.create(job);
      await assert.rejects(store.create(job), /exists/);
      assert.deepEqual(defined(await store.get(job.id)), defined(job));

      const lease = { owner: "w1", expiresAt: new Date(Date.now() + 10_000) };
      const started = startJob(job, new Date(), lease);
      assert.equal(await store.transition(started, { status: "queued" }), true);
      assert.equal(await store.transition(started, { status: "queued" }), false);
      assert.equal(await store.renewLease(job.id, "w2", new Date()), false);
      const renewed = new Date(Date.now() + 20_000);
      assert.equal(await store.renewLease(job.id, "w1", renewed), true);
      assert.equal((await store.get(job.id))?.leaseExpiresAt?.getTime(), renewed.getTime());

      const done = completeJob(started, new Date(), { blobKey: "outputs/x.png", mimeType: "image/png" }, 134_000_000_000n);
      assert.equal(await store.transition(done, { status: "processing", leaseOwner: "w2" }), false);
      assert.equal(await store.transition(done, { status: "processing", leaseOwner: "w1" }), true);
      assert.equal(await store.renewLease(job.id, "w1", new Date()), false);
      const stored = await store.get(job.id);
      assert.equal(stored?.status, "done");
      assert.equal(stored?.charged, 134_000_000_000n);
      assert.equal(stored?.leaseOwner, undefined);
      assert.equal(stored?.createdAt.toISOString(), job.createdAt.toISOString());
    });

    it("when an intent is fenced off, then its job can never be created, and fencing again still says true", async () => {
      const store = await makeStore();
      const fenced = aJob();
      await store.registerIntent(fenced.id, fenced.accountId, new Date());
      assert.equal(await store.abandonIntent(fenced.id), true);
      assert.equal(await store.abandonIntent(fenced.id), true);
      await assert.rejects(store.create(fenced));
      assert.equal(await store.get(fenced.id), undefined);

      const stored = aJob();
      await store.create(stored);
      assert.equal(await store.abandonIntent(stored.id), false);
      assert.equal((await store.get(stored.id))?.status, "queued");
    });

    it("when the unfinished list is paged, then every id comes once, with its job when stored", async () => {
      const store = await makeStore();
      const ids = new Set<string>();
      for (let i = 0; i < 25; i++) {
        const job = aJob();
        ids.add(job.id);
        await store.registerIntent(job.id, job.accountId, new Date(1_000 * i));
        if (i % 2 === 0) await store.create(job);
      }
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.listUnfinished(10, cursor);
        pages++;
        for (const entry of page.entries) {
          seen.push(entry.jobId);
          assert.equal(entry.accountId, "acct");
          assert.ok(entry.since instanceof Date);
          assert.equal(entry.job?.id, [...ids].indexOf(entry.jobId) % 2 === 0 ? entry.jobId : undefined);
        }
        cursor = page.next;
      } while (cursor !== undefined);
      assert.equal(pages, 3);
      assert.deepEqual(new Set(seen), ids);
      assert.equal(seen.length, ids.size);

      const first = [...ids][0]!;
      await store.markFinalized(first);
      const all = await store.listUnfinished(100);
      assert.equal(all.entries.length, 24);
      assert.equal(all.next, undefined);
    });

    it("when an account's jobs are listed, then they come newest first, filtered, paged below the cursor, and only that account's", async () => {
      await jobListContract(await makeStore());
    });

    it("when finished jobs are purged, then only finalized ones finished before the cutoff go, up to the limit", async () => {
      const store = await makeStore();
      const cutoff = new Date("2025-06-01T00:00:00Z");
      const finishAt = async (finishedAt: Date, options: { finalize: boolean; fail?: boolean }) => {
        const job = aJob();
        await store.registerIntent(job.id, job.accountId, job.createdAt);
        await store.create(job);
        const started = startJob(job, job.createdAt, { owner: "w", expiresAt: new Date(finishedAt.getTime() + 1) });
        await store.transition(started, { status: "queued" });
        const finished = options.fail ? failJob(started, finishedAt, "timeout", "slow") : completeJob(started, finishedAt, { text: "t" }, 1n);
        await store.transition(settleJob(finished), { status: "processing" });
        if (options.finalize) await store.markFinalized(job.id);
        return job.id;
      };
      const old = [
        await finishAt(new Date("2025-05-01T00:00:00Z"), { finalize: true }),
        await finishAt(new Date("2025-05-02T00:00:00Z"), { finalize: true, fail: true }),
        await finishAt(new Date("2025-05-03T00:00:00Z"), { finalize: true }),
      ];
      const notFinalized = await finishAt(new Date("2025-05-01T00:00:00Z"), { finalize: false });
      const recent = await finishAt(new Date("2025-06-02T00:00:00Z"), { finalize: true });
      const running = aJob();
      await store.create(running);
      await store.markFinalized(running.id);

      assert.equal(await store.purgeFinished(cutoff, 2), 2);
      assert.equal(await store.purgeFinished(cutoff, 2), 1);
      assert.equal(await store.purgeFinished(cutoff, 2), 0);
      for (const id of old) assert.equal(await store.get(id), undefined);
      assert.equal((await store.get(notFinalized))?.status, "done");
      assert.equal((await store.get(recent))?.status, "done");
      assert.equal((await store.get(running.id))?.status, "queued");
    });
  });
}

describe("SqliteJobStore recent jobs", () => {
  it("when a job is read, then later reads get it without a change being possible, and purged or moved it reads as stored", async () => {
    const store = (await open(freshDir())).stores.jobs;
    const job = aJob();
    await store.registerIntent(job.id, job.accountId, job.createdAt);
    await store.create(job);
    const first = (await store.get(job.id))!;
    assert.equal(await store.get(job.id), first, "a second read is the job already decoded");
    assert.throws(() => ((first as { status: string }).status = "done"), TypeError);
    assert.throws(() => ((first.input as { prompt: string }).prompt = "changed"), TypeError);
    assert.equal((await store.get(job.id))!.status, "queued");

    const started = startJob(job, job.createdAt, { owner: "w", expiresAt: new Date("2025-05-01T00:00:01Z") });
    await store.transition(started, { status: "queued" });
    const finished = completeJob(started, new Date("2025-05-01T00:00:00Z"), { text: "t" }, 1n);
    await store.transition(settleJob(finished), { status: "processing" });
    assert.equal((await store.get(job.id))!.status, "done");
    await store.markFinalized(job.id);
    assert.equal(await store.purgeFinished(new Date("2025-06-01T00:00:00Z"), 10), 1);
    assert.equal(await store.get(job.id), undefined);
  });
});

describe("SqliteJobStore listing migration", () => {
  it("when a database of schema version 2 holds jobs, then version 3 lists them by the creation time and model of their body", async () => {
    const dataDir = freshDir();
    const oldMigrations = join(dataDir, "migrations-v2");
    mkdirSync(oldMigrations);
    const migrations = join(REPO_ROOT, "src/adapters/sqlite/migrations/");
    for (const file of ["0001_initial.sql", "0002_ledger_shortfalls.sql"]) copyFileSync(join(migrations, file), join(oldMigrations, file));
    const old = openSqliteDatabase({ path: join(dataDir, "service.db"), synchronous: "normal", migrationsDir: oldMigrations });
    const jobs = [
      aJob({ createdAt: new Date("2025-01-02T03:04:05.678Z") }),
      aJob({ createdAt: new Date("2025-01-02T03:04:05.679Z"), model: "aimodel-3.5-flash", kind: "text" }),
      aJob({ createdAt: new Date("2024-12-31T23:59:59.999Z") }),
    ];
    const insert = old.db.prepare("INSERT INTO jobs (job_id, account_id, status, body) VALUES (?, ?, 'queued', ?)");
    for (const job of jobs) insert.run(job.id, job.accountId, encodeBody(job));
    old.close();

    const { stores } = await open(dataDir);
    const listed = await stores.jobs.listByAccount({ accountId: "acct", limit: 10 });
    assert.deepEqual(listed.jobs.map((job) => job.id), [jobs[1]!.id, jobs[0]!.id, jobs[2]!.id]);
    const text = await stores.jobs.listByAccount({ accountId: "acct", limit: 10, model: "aimodel-3.5-flash" });
    assert.deepEqual(text.jobs.map((job) => job.id), [jobs[1]!.id]);
    const before = await stores.jobs.listByAccount({ accountId: "acct", limit: 10, createdBefore: new Date("2025-01-02T03:04:05.679Z") });
    assert.deepEqual(before.jobs.map((job) => job.id), [jobs[0]!.id, jobs[2]!.id], "milliseconds survive the backfill");
  });
});

describe("SqliteDeliveryLog listing migration", () => {
  it("when a database of schema version 7 holds deliveries, then version 8 lists them under their job's account, by their last attempt", async () => {
    const dataDir = freshDir();
    const oldMigrations = join(dataDir, "migrations-v7");
    mkdirSync(oldMigrations);
    const migrations = join(REPO_ROOT, "src/adapters/sqlite/migrations/");
    for (const file of readdirSync(migrations).filter((f) => f < "0008")) copyFileSync(join(migrations, file), join(oldMigrations, file));
    const old = openSqliteDatabase({ path: join(dataDir, "service.db"), synchronous: "normal", migrationsDir: oldMigrations });
    const job = aJob({});
    old.db.prepare("INSERT INTO jobs (job_id, account_id, status, body) VALUES (?, ?, 'done', ?)").run(job.id, job.accountId, encodeBody(job));
    const attempt = (iso: string, status: number) => ({ at: iso, url: "https://a.test", status });
    const insert = old.db.prepare("INSERT INTO webhook_deliveries (message_id, job_id, state, attempts) VALUES (?, ?, ?, ?)");
    insert.run("m-early", job.id, "delivered", JSON.stringify([attempt("2025-01-02T03:04:05.678Z", 200)]));
    insert.run("m-late", job.id, "exhausted", JSON.stringify([attempt("2025-01-02T03:04:05.679Z", 500), attempt("2025-01-03T00:00:00.001Z", 500)]));
    old.close();

    const { stores } = await open(dataDir);
    const listed = await stores.deliveries.listByAccount(job.accountId, 10);
    assert.deepEqual(listed.map((r) => [r.messageId, r.accountId]), [["m-late", job.accountId], ["m-early", job.accountId]]);
    assert.deepEqual((await stores.deliveries.listExhausted(10)).map((r) => r.messageId), ["m-late"]);
  });
});

describe("SqliteLedger release reasons migration", () => {
  it("when a database of schema version 12 holds a release, then version 13 reads it with no reason, and new releases keep theirs", async () => {
    const dataDir = freshDir();
    const oldMigrations = join(dataDir, "migrations-v12");
    mkdirSync(oldMigrations);
    const migrations = join(REPO_ROOT, "src/adapters/sqlite/migrations/");
    for (const file of readdirSync(migrations).filter((f) => f < "0013")) copyFileSync(join(migrations, file), join(oldMigrations, file));
    const old = openSqliteDatabase({ path: join(dataDir, "service.db"), synchronous: "normal", migrationsDir: oldMigrations });
    old.db.prepare("INSERT INTO accounts (account_id, name, balance, reserved, created_at) VALUES ('acct', 'acct', '1000', '0', 1)").run();
    const entry = old.db.prepare(
      `INSERT INTO ledger_entries (account_id, kind, amount, balance_after, reserved_change, reserved_after, reservation_id, job_id, model, at)
       VALUES ('acct', ?, ?, '1000', ?, ?, ?, ?, ?, ?)`,
    );
    entry.run("credit", "1000", "0", "0", null, null, null, 1);
    entry.run("hold", "0", "100", "100", "job:old", "old", "m", 2);
    entry.run("release", "0", "-100", "0", "job:old", "old", "m", 3);
    old.close();

    const { stores } = await open(dataDir);
    await stores.ledger.reserve("acct", "job:new", 100n, { memo: { jobId: "new", model: "m" } });
    await stores.ledger.release("acct", "job:new", "job_canceled");
    const entries = (await stores.ledger.entries({ accountId: "acct", limit: 10 })).entries;
    assert.deepEqual(entries.map((e) => [e.type, e.memo?.jobId, e.reason]).reverse(), [
      ["credit", undefined, undefined], ["hold", "old", undefined], ["release", "old", undefined],
      ["hold", "new", undefined], ["release", "new", "job_canceled"],
    ]);
  });
});

describe("SqliteJobStore retention", () => {
  it("when a job is purged, then its webhook deliveries go with it, and holds, ledger rows, accounts and keys stay", async () => {
    const { stores, database } = await open(freshDir());
    await stores.ledger.createAccount("acct", "acct", 1_000n);
    await stores.apiKeys.create({
      keyId: "k1", accountId: "acct", secretHash: "h1", models: ["*"], revoked: false, createdAt: new Date(),
    });
    const job = aJob();
    await stores.jobs.registerIntent(job.id, "acct", job.createdAt);
    await stores.ledger.reserve("acct", job.reservationId, 100n);
    await stores.jobs.create(job);
    const started = startJob(job, new Date("2025-01-01T00:00:00Z"));
    await stores.jobs.transition(started, { status: "queued" });
    const done = settleJob(completeJob(started, new Date("2025-01-01T00:01:00Z"), { text: "t" }, 80n));
    await stores.jobs.transition(done, { status: "processing" });
    await stores.ledger.settle("acct", job.reservationId, 80n);
    await stores.jobs.markFinalized(job.id);
    const messageId = `msg_${job.id}_done`;
    await stores.deliveries.finish(messageId, "delivered"); // finished before its attempt was recorded: no job id yet
    await stores.deliveries.recordAttempt(`msg_${job.id}_other`, { jobId: job.id, accountId: "acct" }, { at: new Date(), url: "https://x.test", status: 500 });
    await stores.deliveries.recordAttempt("msg_someone_else", { jobId: "someone-else", accountId: "acct" }, { at: new Date(), url: "https://x.test", status: 500 });

    assert.equal(await stores.jobs.purgeFinished(new Date("2025-02-01T00:00:00Z"), 10), 1);
    assert.equal(await stores.jobs.get(job.id), undefined);
    assert.equal(await stores.deliveries.get(messageId), undefined);
    assert.equal(await stores.deliveries.get(`msg_${job.id}_other`), undefined);
    assert.equal((await stores.deliveries.get("msg_someone_else"))?.jobId, "someone-else");
    assert.deepEqual(await stores.ledger.balance("acct"), { balance: 920n, reserved: 0n });
    assert.equal(database.db.prepare("SELECT count(*) FROM holds").pluck().get(), 1);
    // Kept: the opening credit, the hold and its charge.
    assert.equal(database.db.prepare("SELECT count(*) FROM ledger_entries").pluck().get(), 3);
    assert.equal((await stores.apiKeys.findBySecretHash("h1"))?.keyId, "k1");
  });
});

/** The idempotency contract with a controllable clock, against SQLite and memory alike. */
const idempotencyStores: [string, (now: () => number) => Promise<IdempotencyStore>][] = [
  ["SqliteIdempotencyStore", async (now) => new SqliteIdempotencyStore((await open(freshDir())).database.db, now)],
  ["MemoryIdempotencyStore", async (now) => new MemoryIdempotencyStore(now)],
];

for (const [name, makeStore] of idempotencyStores) {
  describe(name, () => {
    const TTL = 60_000;

    it("when 50 requests claim one key at once, then exactly one gets it and the others see it in progress", async () => {
      const store = await makeStore(Date.now);
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, (_, i) => store.claim("acct", "k", "fp", { jobId: `job-${i}` }, TTL)),
      );
      const claimed = outcomes.filter((o) => o.kind === "claimed");
      assert.equal(claimed.length, 1);
      const winner = outcomes.findIndex((o) => o.kind === "claimed");
      for (const outcome of outcomes) {
        if (outcome.kind !== "in_progress") continue;
        assert.equal(outcome.fingerprint, "fp");
        assert.equal(outcome.token, claimed[0]!.kind === "claimed" ? claimed[0]!.token : "");
        assert.deepEqual(outcome.pending, { jobId: `job-${winner}` });
        assert.ok(outcome.claimedAt instanceof Date);
      }
    });

    it("when the owner completes, then later claims replay the response, and nobody else can complete or give it back", async () => {
      let now = 1_000_000;
      const store = await makeStore(() => now);
      const claim = await store.claim("acct", "k", "fp", { jobId: "j1" }, TTL);
      assert.equal(claim.kind, "claimed");
      if (claim.kind !== "claimed") return;
      await assert.rejects(store.complete("acct", "k", "not-the-owner", { jobId: "j1" }, TTL));
      await store.abandon("acct", "k", "not-the-owner");
      const inProgress = await store.claim("acct", "k", "fp", { jobId: "j2" }, TTL);
      assert.deepEqual(inProgress, {
        kind: "in_progress", fingerprint: "fp", token: claim.token, pending: { jobId: "j1" }, claimedAt: new Date(1_000_000),
      });
      now += 1_000;
      await store.complete("acct", "k", claim.token, { jobId: "j1" }, TTL);
      assert.deepEqual(await store.claim("acct", "k", "other", { jobId: "j3" }, TTL), {
        kind: "completed", fingerprint: "fp", response: { jobId: "j1" },
      });
      await store.abandon("acct", "k", claim.token); // a completed key stands for a job: not even its owner gives it back
      assert.equal((await store.claim("acct", "k", "fp", { jobId: "j4" }, TTL)).kind, "completed");
      assert.equal((await store.claim("other-account", "k", "fp", { jobId: "j5" }, TTL)).kind, "claimed");
    });

    it("when a rejected request gives its key back, then the next claim gets it", async () => {
      const store = await makeStore(Date.now);
      const claim = await store.claim("acct", "k", "fp", { jobId: "j1" }, TTL);
      assert.equal(claim.kind, "claimed");
      if (claim.kind === "claimed") await store.abandon("acct", "k", claim.token);
      assert.equal((await store.claim("acct", "k", "fp2", { jobId: "j2" }, TTL)).kind, "claimed");
    });

    it("when a dead claim is taken over, then only the token that owns it can, and the old owner is locked out", async () => {
      let now = 5_000_000;
      const store = await makeStore(() => now);
      const dead = await store.claim("acct", "k", "fp", { jobId: "dead-job" }, TTL);
      assert.equal(dead.kind, "claimed");
      if (dead.kind !== "claimed") return;
      now += 10_000;
      const taken = await store.takeOver("acct", "k", dead.token, "fp", { jobId: "new-job" }, TTL);
      assert.equal(taken.kind, "claimed");
      if (taken.kind !== "claimed") return;
      assert.notEqual(taken.token, dead.token);
      assert.deepEqual(await store.claim("acct", "k", "fp", { jobId: "x" }, TTL), {
        kind: "in_progress", fingerprint: "fp", token: taken.token, pending: { jobId: "new-job" }, claimedAt: new Date(now),
      });
      // A second rescuer with the old token sees the current claim, not a new one.
      const late = await store.takeOver("acct", "k", dead.token, "fp", { jobId: "late-job" }, TTL);
      assert.equal(late.kind, "in_progress");
      await assert.rejects(store.complete("acct", "k", dead.token, { jobId: "dead-job" }, TTL));
      await store.complete("acct", "k", taken.token, { jobId: "new-job" }, TTL);
      assert.deepEqual(await store.takeOver("acct", "k", taken.token, "fp", { jobId: "y" }, TTL), {
        kind: "completed", fingerprint: "fp", response: { jobId: "new-job" },
      });
      const gone = await store.takeOver("acct", "gone-key", "whatever", "fp", { jobId: "z" }, TTL);
      assert.equal(gone.kind, "claimed");
    });

    it("when a key expires, then it reads as absent, its owner can no longer complete it, and purgeExpired removes it", async () => {
      let now = 10_000_000;
      const store = await makeStore(() => now);
      const stale = await store.claim("acct", "stale", "fp", { jobId: "j1" }, 1_000);
      const completed = await store.claim("acct", "done", "fp", { jobId: "j2" }, 1_000);
      if (completed.kind === "claimed") await store.complete("acct", "done", completed.token, { jobId: "j2" }, 5_000);
      await store.claim("acct", "fresh", "fp", { jobId: "j3" }, 60_000);
      now += 2_000;
      if (stale.kind === "claimed") await assert.rejects(store.complete("acct", "stale", stale.token, { jobId: "j1" }, 5_000));
      assert.equal((await store.claim("acct", "done", "fp", { jobId: "j4" }, 1_000)).kind, "completed");
      now += 4_000; // now "stale" and "done" are past their expiry, "fresh" is not
      assert.equal(await store.purgeExpired(new Date(now)), 2);
      assert.equal(await store.purgeExpired(new Date(now)), 0);
      assert.equal((await store.claim("acct", "stale", "fp", { jobId: "j5" }, 1_000)).kind, "claimed");
      assert.equal((await store.claim("acct", "fresh", "fp", { jobId: "j6" }, 1_000)).kind, "in_progress");
    });
  });
}

describe("SqliteSettingsStore", () => {
  it("when the store is reopened, then prices an admin changed, pauses and webhooks survive and defaults do not overwrite them", async () => {
    const dir = freshDir();
    const first = await open(dir);
    const defaults = await first.stores.settings.prices();
    assert.equal(defaults.get("aimodel-3-pro-image")?.perImage?.["4K"], 240_000_000_000n);
    const changed = { ...defaults.get("aimodel-3-pro-image")!, perImage: { "1K": 1n, "2K": 2n, "4K": 3n } };
    await first.stores.settings.setPrices("aimodel-3-pro-image", changed);
    await first.stores.settings.setProjectPaused(true);
    await first.stores.settings.setModelPaused("aimodel-3.5-flash", true);
    await first.stores.settings.setModelPaused("aimodel-3-pro-image", true);
    await first.stores.settings.setModelPaused("aimodel-3-pro-image", false);
    await first.stores.settings.setRoutePaused("eu", true);
    await first.stores.settings.setWebhook("acct", { url: "https://hooks.test/a", secret: "whsec_abc" });
    await first.stores.settings.setWebhook("gone", { url: "https://hooks.test/b", secret: "whsec_def" });
    await first.stores.settings.setWebhook("gone", undefined);
    await first.close();

    const more = parsePriceTable({
      "aimodel-3-pro-image": { per_image: { "1K": "9", "2K": "9", "4K": "9" } },
      "aimodel-3.5-flash": { input_per_million_tokens: "0.30", output_per_million_tokens: "2.50" },
      "aimodel-3.1-flash-lite": { input_per_million_tokens: "0.10", output_per_million_tokens: "0.40" },
    });
    const second = await open(dir, { defaultPrices: more });
    const prices = await second.stores.settings.prices();
    assert.deepEqual(prices.get("aimodel-3-pro-image")?.perImage, { "1K": 1n, "2K": 2n, "4K": 3n });
    assert.equal(prices.get("aimodel-3.1-flash-lite")?.outputPerMillion, 400_000_000_000n); // new in the config: seeded
    assert.equal(await second.stores.settings.isProjectPaused(), true);
    assert.deepEqual(await second.stores.settings.pausedModels(), new Set(["aimodel-3.5-flash"]));
    assert.deepEqual(await second.stores.settings.pausedRoutes(), new Set(["eu"]));
    assert.deepEqual(await second.stores.settings.webhook("acct"), { url: "https://hooks.test/a", secret: "whsec_abc" });
    assert.equal(await second.stores.settings.webhook("gone"), undefined);
  });
});

describe("SqliteApiKeyStore", () => {
  it("when a key is created and revoked, then it is found by hash with its models, and revoked survives a reopen", async () => {
    const dir = freshDir();
    const first = await open(dir);
    const createdAt = new Date("2025-03-04T05:06:07.089Z");
    await first.stores.apiKeys.create({
      keyId: "k1", accountId: "acct", secretHash: "hash-1", models: ["*", "aimodel-3.5-flash"], revoked: false, createdAt,
    });
    assert.equal(await first.stores.apiKeys.revoke("missing"), false);
    assert.equal(await first.stores.apiKeys.revoke("k1"), true);
    await first.close();
    const second = await open(dir);
    assert.deepEqual(await second.stores.apiKeys.findBySecretHash("hash-1"), {
      keyId: "k1", accountId: "acct", secretHash: "hash-1", models: ["*", "aimodel-3.5-flash"], revoked: true, createdAt,
    });
    assert.equal(await second.stores.apiKeys.findBySecretHash("nope"), undefined);
  });
});

describe("SqliteApiKeyStore listing", () => {
  apiKeyListingContract(async () => (await open(freshDir())).stores.apiKeys, () => randomUUID().slice(0, 8));
  apiKeyChangeContract(async () => (await open(freshDir())).stores.apiKeys, () => randomUUID().slice(0, 8));
});

describe("MemoryApiKeyStore listing", () => {
  apiKeyListingContract(async () => new MemoryApiKeyStore(), () => randomUUID().slice(0, 8));
  apiKeyChangeContract(async () => new MemoryApiKeyStore(), () => randomUUID().slice(0, 8));
});

describe("SqliteDeliveryLog", () => {
  it("when a delivery is finished, then only the first final state wins and attempts keep their order and times", async () => {
    const { stores } = await open(freshDir());
    const log = stores.deliveries;
    assert.equal(await log.get("m1"), undefined);
    const first = { at: new Date("2025-01-01T00:00:00.123Z"), url: "https://a.test", status: 503 };
    const second = { at: new Date("2025-01-01T00:00:05.456Z"), url: "https://a.test", error: "timeout" };
    await log.recordAttempt("m1", { jobId: "job-1", accountId: "acct" }, first);
    await log.recordAttempt("m1", { jobId: "job-1", accountId: "acct" }, second);
    assert.deepEqual(await log.get("m1"), { messageId: "m1", jobId: "job-1", accountId: "acct", state: "pending", attempts: [first, second] });
    const results = await Promise.all([log.finish("m1", "delivered"), log.finish("m1", "exhausted"), log.finish("m1", "delivered")]);
    assert.deepEqual(results, [true, false, false]);
    assert.equal((await log.get("m1"))?.state, "delivered");

    assert.equal(await log.finish("m2", "exhausted"), true); // finish before any attempt is recorded
    await log.recordAttempt("m2", { jobId: "job-2", accountId: "acct" }, first);
    assert.deepEqual(await log.get("m2"), { messageId: "m2", jobId: "job-2", accountId: "acct", state: "exhausted", attempts: [first] });
  });

  deliveryListingContract(async () => (await open(freshDir())).stores.deliveries, () => randomUUID().slice(0, 8));
});

describe("MemoryDeliveryLog listing", () => {
  deliveryListingContract(async () => new MemoryDeliveryLog(), () => randomUUID().slice(0, 8));
});

describe("SQLite errors", () => {
  it("when the database stays locked past the busy timeout, then a write fails with DependencyUnavailableError", async () => {
    const stores = await open(freshDir(), { busyTimeoutMs: 50 });
    const other = new Database(stores.path);
    try {
      other.exec("BEGIN IMMEDIATE");
      const error = await stores.stores.ledger.createAccount("a", "a", 1n).then(() => undefined, (e: unknown) => e);
      assert.ok(error instanceof DependencyUnavailableError, `expected DependencyUnavailableError, got ${String(error)}`);
      assert.equal(error.dependency, "sqlite");
      assert.equal((error.cause as { code?: string }).code, "SQLITE_BUSY");
      other.exec("ROLLBACK");
      await stores.stores.ledger.createAccount("a", "a", 1n);
      await stores.probe.check(AbortSignal.timeout(1_000));
    } finally {
      other.close();
    }
  });

  it("when SQLite reports full, I/O, cannot-open or read-only errors, then they map to unavailable, and others do not", () => {
    for (const code of ["SQLITE_BUSY", "SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_READONLY_DBMOVED"]) {
      const original = Object.assign(new Error("x"), { code });
      const mapped = mapSqliteError(original);
      assert.ok(mapped instanceof DependencyUnavailableError, code);
      assert.equal(mapped.cause, original);
    }
    for (const code of ["SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_ERROR", "SQLITE_CORRUPT", undefined]) {
      const original = Object.assign(new Error("x"), { code });
      assert.equal(mapSqliteError(original), original);
    }
  });
});

describe("SqliteIntentHolds", () => {
  const MEMO = { memo: { model: "aimodel-3-pro-image", keyId: "key_1" } };

  it("when a hold is reserved with its intent in one write, then the intent is listed unfinished and the amount is held", async () => {
    const { stores } = await open(freshDir());
    await stores.ledger.createAccount("acct_1", "one", 1_000_000n);
    const outcome = await stores.intentHolds.registerAndReserve("job-1", "acct_1", new Date(1_000), "job:job-1", 400_000n, MEMO);
    assert.equal(outcome, "reserved");
    const { entries } = await stores.jobs.listUnfinished(10);
    assert.deepEqual(entries.map((entry) => [entry.jobId, entry.accountId]), [["job-1", "acct_1"]]);
    assert.deepEqual(await stores.ledger.balance("acct_1"), { balance: 1_000_000n, reserved: 400_000n });
  });

  it("when the reservation is refused, then neither the intent nor a hold is left behind", async () => {
    const { stores } = await open(freshDir());
    await stores.ledger.createAccount("acct_1", "one", 100n);
    assert.equal(await stores.intentHolds.registerAndReserve("job-1", "acct_1", new Date(1_000), "job:job-1", 400_000n, MEMO), "insufficient_funds");
    assert.equal(await stores.intentHolds.registerAndReserve("job-2", "acct_x", new Date(1_000), "job:job-2", 1n, MEMO), "unknown_account");
    assert.deepEqual((await stores.jobs.listUnfinished(10)).entries, []);
    assert.deepEqual(await stores.ledger.balance("acct_1"), { balance: 100n, reserved: 0n });
  });

  it("when the same intent is reserved again, then nothing more is held and it stays listed once", async () => {
    const { stores } = await open(freshDir());
    await stores.ledger.createAccount("acct_1", "one", 1_000_000n);
    for (let i = 0; i < 2; i++) {
      assert.equal(await stores.intentHolds.registerAndReserve("job-1", "acct_1", new Date(1_000), "job:job-1", 400_000n, MEMO), "reserved");
    }
    assert.equal((await stores.jobs.listUnfinished(10)).entries.length, 1);
    assert.deepEqual(await stores.ledger.balance("acct_1"), { balance: 1_000_000n, reserved: 400_000n });
  });

  it("when a hold is settled with its intent in one write, then the charge is made, the intent is no longer listed, and a repeat answers the same charge", async () => {
    const { stores } = await open(freshDir());
    await stores.ledger.createAccount("acct_1", "one", 1_000_000n);
    await stores.intentHolds.registerAndReserve("call-1", "acct_1", new Date(1_000), "job:call-1", 400_000n, MEMO);
    const end = { charge: 150_000n, tokens: { promptTokens: 10, candidatesTokens: 20 } };
    assert.deepEqual(await stores.intentHolds.endAndFinalize("call-1", "acct_1", "job:call-1", end), { charged: 150_000n, shortfall: 0n });
    assert.deepEqual((await stores.jobs.listUnfinished(10)).entries, []);
    assert.deepEqual(await stores.ledger.balance("acct_1"), { balance: 850_000n, reserved: 0n });
    assert.deepEqual(await stores.intentHolds.endAndFinalize("call-1", "acct_1", "job:call-1", end), { charged: 150_000n, shortfall: 0n, repeated: true });
    assert.deepEqual(await stores.ledger.balance("acct_1"), { balance: 850_000n, reserved: 0n });
  });

  it("when a hold is released with its intent in one write, then nothing is charged, the intent is no longer listed, and the release entry says why", async () => {
    const { stores } = await open(freshDir());
    await stores.ledger.createAccount("acct_1", "one", 1_000_000n);
    await stores.intentHolds.registerAndReserve("call-1", "acct_1", new Date(1_000), "job:call-1", 400_000n, MEMO);
    assert.equal(await stores.intentHolds.endAndFinalize("call-1", "acct_1", "job:call-1", { release: "nothing_delivered" }), undefined);
    assert.deepEqual((await stores.jobs.listUnfinished(10)).entries, []);
    assert.deepEqual(await stores.ledger.balance("acct_1"), { balance: 1_000_000n, reserved: 0n });
    const [release] = (await stores.ledger.entries({ accountId: "acct_1", limit: 1 })).entries;
    assert.equal(release?.type, "release");
    assert.equal(release?.reason, "nothing_delivered");
  });

  it("when 100 text calls hold at once against funds for 40, then they share commits, exactly 40 are held with their intents, and their ends share commits too", async () => {
    const commits: number[] = [];
    const counted = await openSqliteStores({ dataDir: freshDir(), synchronous: "full", defaultPrices: PRICES, onGroupCommit: (writes) => commits.push(writes) });
    opened.push(counted);
    const { stores } = counted;
    await stores.ledger.createAccount("acct_1", "one", 40n * 400_000n);
    const ids = Array.from({ length: 100 }, (_, i) => `call-${i}`);
    const outcomes = await Promise.all(ids.map((id) => stores.intentHolds.registerAndReserve(id, "acct_1", new Date(1_000), `job:${id}`, 400_000n, MEMO)));
    const held = ids.filter((_, i) => outcomes[i] === "reserved");
    assert.equal(held.length, 40);
    assert.ok(outcomes.every((outcome) => outcome === "reserved" || outcome === "insufficient_funds"), String(outcomes));
    assert.ok(commits.length < 100 && commits.some((writes) => writes > 1), `commits: ${commits}`);
    assert.deepEqual((await stores.jobs.listUnfinished(500)).entries.map((entry) => entry.jobId).sort(), [...held].sort());
    assert.deepEqual(await stores.ledger.balance("acct_1"), { balance: 16_000_000n, reserved: 16_000_000n });

    const before = commits.length;
    const ends = await Promise.all(held.map((id) => stores.intentHolds.endAndFinalize(id, "acct_1", `job:${id}`, { charge: 100_000n })));
    assert.ok(ends.every((end) => end?.charged === 100_000n && end.shortfall === 0n), JSON.stringify(ends, (_, v) => (typeof v === "bigint" ? `${v}` : v)));
    assert.ok(commits.length - before < held.length, `commits: ${commits.slice(before)}`);
    assert.deepEqual((await stores.jobs.listUnfinished(500)).entries, []);
    assert.deepEqual(await stores.ledger.balance("acct_1"), { balance: 16_000_000n - 40n * 100_000n, reserved: 0n });
  });

  it("when the store has stopped taking writes (it is closing), then a text call's hold is refused as unavailable and nothing is held", async () => {
    const closing = await open(freshDir());
    const { stores } = closing;
    await stores.ledger.createAccount("acct_1", "one", 1_000_000n);
    closing.stopWrites();
    await assert.rejects(
      stores.intentHolds.registerAndReserve("call-1", "acct_1", new Date(1_000), "job:call-1", 400_000n, MEMO),
      (error) => error instanceof DependencyUnavailableError,
    );
    assert.deepEqual((await stores.jobs.listUnfinished(10)).entries, []);
    assert.deepEqual(await stores.ledger.balance("acct_1"), { balance: 1_000_000n, reserved: 0n });
  });

  it("when the store has stopped taking writes (it is closing) while a stream still ends, then its end settles on its own, once", async () => {
    const closing = await open(freshDir());
    const { stores } = closing;
    await stores.ledger.createAccount("acct_1", "one", 1_000_000n);
    await stores.intentHolds.registerAndReserve("call-1", "acct_1", new Date(1_000), "job:call-1", 400_000n, MEMO);
    closing.stopWrites();
    const end = { charge: 150_000n, tokens: { promptTokens: 10, candidatesTokens: 20 } };
    assert.deepEqual(await stores.intentHolds.endAndFinalize("call-1", "acct_1", "job:call-1", end), { charged: 150_000n, shortfall: 0n });
    assert.deepEqual(await stores.intentHolds.endAndFinalize("call-1", "acct_1", "job:call-1", end), { charged: 150_000n, shortfall: 0n, repeated: true });
    assert.deepEqual((await stores.jobs.listUnfinished(10)).entries, []);
    assert.deepEqual(await stores.ledger.balance("acct_1"), { balance: 850_000n, reserved: 0n });
  });

  it("when ending the intent fails inside the write, then the hold is not ended either", async () => {
    const opened = await open(freshDir());
    const { stores } = opened;
    await stores.ledger.createAccount("acct_1", "one", 1_000_000n);
    await stores.intentHolds.registerAndReserve("call-1", "acct_1", new Date(1_000), "job:call-1", 400_000n, MEMO);
    // The intent's row cannot be deleted: the write fails after the settlement moved the money, and takes it back.
    opened.database.db.exec(
      "CREATE TRIGGER keep_intent BEFORE DELETE ON unfinished_jobs BEGIN SELECT RAISE(ABORT, 'kept'); END",
    );
    await assert.rejects(stores.intentHolds.endAndFinalize("call-1", "acct_1", "job:call-1", { charge: 150_000n }));
    assert.equal((await stores.jobs.listUnfinished(10)).entries.length, 1);
    assert.deepEqual(await stores.ledger.balance("acct_1"), { balance: 1_000_000n, reserved: 400_000n });
  });
});

describe("SqliteAcceptanceWrites", () => {
  const HOLD = { amount: 134_000_000_000n, options: { memo: { model: "aimodel-3-pro-image", keyId: "key_1" } } };
  const announcementOf = (jobId: string) => ({ topic: "generation.requested" as const, key: jobId, event: { jobId } });

  /** The generation workers' announcements as a subscriber of the file's bus receives them. */
  async function announcementsHeard(opened: SqliteStores) {
    const heard: string[] = [];
    await opened.bus.subscribe<{ jobId: string }>("generation.requested", "workers", async (event) => {
      heard.push(event.jobId);
    });
    // The subscription's first look at the table is over: from here only a publish's wake-up delivers.
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    return heard;
  }

  it("when a job is accepted in one write, then its hold is held, its intent listed, the job stored, and its announcement heard once", async () => {
    const opened = await open(freshDir());
    const { stores } = opened;
    const heard = await announcementsHeard(opened);
    await stores.ledger.createAccount("acct", "one", 200_000_000_000n);
    const job = aJob();
    assert.equal(await opened.acceptanceWrites.accept(job, HOLD, announcementOf(job.id)), "reserved");
    assert.deepEqual(await stores.ledger.balance("acct"), { balance: 200_000_000_000n, reserved: 134_000_000_000n });
    assert.deepEqual((await stores.jobs.listUnfinished(10)).entries.map((entry) => entry.jobId), [job.id]);
    assert.deepEqual(defined(await stores.jobs.get(job.id)), defined(job));
    await eventually(() => heard.length === 1, Boolean, { what: "the announcement", timeoutMs: 5_000 });
    assert.deepEqual(heard, [job.id]);
  });

  /** Nothing of the acceptance was written: no money held, no intent listed, the job not stored, nothing announced. */
  async function assertNothingWritten(opened: SqliteStores, job: Job, balance: bigint) {
    assert.deepEqual(await opened.stores.ledger.balance("acct"), { balance, reserved: 0n });
    assert.deepEqual((await opened.stores.jobs.listUnfinished(10)).entries, []);
    assert.equal(await opened.stores.jobs.get(job.id), undefined);
    assert.equal(opened.database.db.prepare("SELECT count(*) FROM bus_events").pluck().get(), 0);
  }

  it("when the reservation is refused, then nothing is written: no hold, no intent, no job, no announcement", async () => {
    const opened = await open(freshDir());
    const { stores } = opened;
    await stores.ledger.createAccount("acct", "one", 100n);
    const job = aJob();
    assert.equal(await opened.acceptanceWrites.accept(job, HOLD, announcementOf(job.id)), "insufficient_funds");
    const unknown = aJob({ accountId: "nobody" });
    assert.equal(await opened.acceptanceWrites.accept(unknown, HOLD, announcementOf(unknown.id)), "unknown_account");
    await assertNothingWritten(opened, job, 100n);
  });

  it("when the job id was fenced off by a retry, then the reservation is taken back and nothing else is written", async () => {
    const opened = await open(freshDir());
    const { stores } = opened;
    await stores.ledger.createAccount("acct", "one", 200_000_000_000n);
    const job = aJob();
    assert.equal(await stores.jobs.abandonIntent(job.id), true);
    assert.equal(await opened.acceptanceWrites.accept(job, HOLD, announcementOf(job.id)), "fenced");
    await assertNothingWritten(opened, job, 200_000_000_000n);
  });

  it("when the job is stored already, then the answer says so and nothing more is held or announced", async () => {
    const opened = await open(freshDir());
    const { stores } = opened;
    await stores.ledger.createAccount("acct", "one", 500_000_000_000n);
    const job = aJob();
    await stores.jobs.create(job);
    assert.equal(await opened.acceptanceWrites.accept(job, HOLD, announcementOf(job.id)), "exists");
    assert.deepEqual(await stores.ledger.balance("acct"), { balance: 500_000_000_000n, reserved: 0n });
    assert.equal(opened.database.db.prepare("SELECT count(*) FROM bus_events").pluck().get(), 0);
  });

  it("when 200 jobs are accepted at once against funds for 50, then they share commits, exactly 50 are written whole and the others leave nothing", async () => {
    const commits: number[] = [];
    const opened = await openSqliteStores({ dataDir: freshDir(), synchronous: "full", defaultPrices: PRICES, onGroupCommit: (writes) => commits.push(writes) });
    const { stores } = opened;
    const heard = await announcementsHeard(opened);
    await stores.ledger.createAccount("acct", "one", 50n * HOLD.amount);
    const jobs = Array.from({ length: 200 }, () => aJob());
    const outcomes = await Promise.all(jobs.map((job) => opened.acceptanceWrites.accept(job, HOLD, announcementOf(job.id))));
    const accepted = jobs.filter((_, i) => outcomes[i] === "reserved");
    assert.equal(accepted.length, 50);
    assert.ok(outcomes.every((outcome) => outcome === "reserved" || outcome === "insufficient_funds"), String(outcomes));
    assert.deepEqual(await stores.ledger.balance("acct"), { balance: 50n * HOLD.amount, reserved: 50n * HOLD.amount });
    assert.deepEqual(
      (await stores.jobs.listUnfinished(500)).entries.map((entry) => entry.jobId).sort(),
      accepted.map((job) => job.id).sort(),
    );
    for (const job of jobs) assert.equal((await stores.jobs.get(job.id)) !== undefined, accepted.includes(job), job.id);
    await eventually(() => heard.length === 50, Boolean, { what: "50 announcements", timeoutMs: 5_000 });
    assert.deepEqual([...heard].sort(), accepted.map((job) => job.id).sort());
    // Asked in one turn of the event loop: 200 acceptances in two commits (at most 128 in one).
    assert.deepEqual(commits, [128, 72]);
    await opened.close();
  });

  it("when jobs are accepted at once under different traces, then each announcement carries its own request's trace", async () => {
    // Tracing on as the service turns it on: an async-local context and W3C trace context on the bus's events.
    new NodeTracerProvider().register();
    const tracer = trace.getTracer("test");
    try {
      const opened = await open(freshDir());
      await opened.stores.ledger.createAccount("acct", "one", 10n * HOLD.amount);
      await announcementsHeard(opened);
      const spans = [1, 2, 3].map((n) => tracer.startSpan(`request ${n}`));
      const jobs = spans.map(() => aJob());
      await Promise.all(jobs.map((job, i) =>
        context.with(trace.setSpan(context.active(), spans[i]!), () => opened.acceptanceWrites.accept(job, HOLD, announcementOf(job.id))),
      ));
      const rows = opened.database.db.prepare("SELECT event_key, trace FROM bus_events").all() as { event_key: string; trace: string }[];
      assert.equal(rows.length, 3);
      for (const row of rows) {
        const span = spans[jobs.findIndex((job) => job.id === row.event_key)]!;
        assert.ok(row.trace.includes(span.spanContext().spanId), `${row.event_key}: ${row.trace} should name span ${span.spanContext().spanId}`);
      }
    } finally {
      trace.disable();
      context.disable();
      propagation.disable();
    }
  });

  it("when the store closes while an acceptance waits for its group commit, then it is committed first and found after reopening", async () => {
    const dir = freshDir();
    const first = await openSqliteStores({ dataDir: dir, synchronous: "full", defaultPrices: PRICES });
    await first.stores.ledger.createAccount("acct", "one", 200_000_000_000n);
    const job = aJob();
    const accepted = first.acceptanceWrites.accept(job, HOLD, announcementOf(job.id));
    await first.close();
    assert.equal(await accepted, "reserved");
    const second = await open(dir);
    assert.deepEqual(await second.stores.ledger.balance("acct"), { balance: 200_000_000_000n, reserved: HOLD.amount });
    assert.deepEqual(defined(await second.stores.jobs.get(job.id)), defined(job));
  });

  it("when storing the announcement fails inside the write, then the hold, the intent and the job are not written either", async () => {
    const opened = await open(freshDir());
    const { stores } = opened;
    await stores.ledger.createAccount("acct", "one", 200_000_000_000n);
    await announcementsHeard(opened);
    opened.database.db.exec("CREATE TRIGGER refuse_event BEFORE INSERT ON bus_events BEGIN SELECT RAISE(ABORT, 'refused'); END");
    const job = aJob();
    await assert.rejects(opened.acceptanceWrites.accept(job, HOLD, announcementOf(job.id)), /refused/);
    assert.deepEqual(await stores.ledger.balance("acct"), { balance: 200_000_000_000n, reserved: 0n });
    assert.deepEqual((await stores.jobs.listUnfinished(10)).entries, []);
    assert.equal(await stores.jobs.get(job.id), undefined);
  });
});

/** Issue 34: a file deleted (or replaced) under the open store takes every later write with it; the store refuses them. */
describe("the database's files under the open store", () => {
  async function watched(dataDir: string) {
    const lost: DependencyUnavailableError[] = [];
    const stores = await openSqliteStores({ dataDir, synchronous: "full", defaultPrices: PRICES, onFileLost: (error) => lost.push(error) });
    opened.push(stores);
    await stores.stores.ledger.createAccount("acct", "acct", 1_000n);
    return { stores, lost };
  }

  const unavailable = (error: unknown) => error instanceof DependencyUnavailableError && error.dependency === "sqlite";

  it("when the WAL alone is deleted, then grouped writes, the flush before an answer, the probe and plain writes are refused as unavailable, and it is told once", async () => {
    const { stores, lost } = await watched(freshDir());
    rmSync(`${stores.path}-wal`);
    await assert.rejects(stores.stores.intentHolds.registerAndReserve("text-1", "acct", new Date(), "r-1", 1n, {}), unavailable);
    await assert.rejects(stores.barrier.flush(), unavailable);
    await assert.rejects(stores.probe.check(AbortSignal.timeout(1_000)), unavailable);
    // A write that no check stands before: the connection itself no longer writes.
    await assert.rejects(stores.stores.ledger.credit("acct", 1n), (error: unknown) =>
      unavailable(error) && ((error as Error).cause as { code?: string }).code === "SQLITE_READONLY");
    assert.equal(lost.length, 1);
    assert.ok(lost[0]!.message.includes(`${stores.path}-wal was deleted`), lost[0]!.message);
    // Reads still answer from the open file: the refusal is about writes that could not last.
    assert.deepEqual(await stores.stores.ledger.balance("acct"), { balance: 1_000n, reserved: 0n });
  });

  it("when service.db is replaced by another file (a copy moved over it), then writes are refused as unavailable", async () => {
    const { stores, lost } = await watched(freshDir());
    const copy = `${stores.path}.copy`;
    copyFileSync(stores.path, copy);
    renameSync(copy, stores.path);
    await assert.rejects(stores.barrier.flush(), unavailable);
    await assert.rejects(stores.stores.intentHolds.registerAndReserve("text-1", "acct", new Date(), "r-1", 1n, {}), unavailable);
    assert.equal(lost.length, 1);
    assert.ok(lost[0]!.message.includes(`${stores.path} was replaced`), lost[0]!.message);
  });

  it("when nothing happens to the files, then writes, flushes and probes go on as before", async () => {
    const { stores, lost } = await watched(freshDir());
    assert.equal(await stores.stores.intentHolds.registerAndReserve("text-1", "acct", new Date(), "r-1", 1n, {}), "reserved");
    await stores.barrier.flush();
    await stores.probe.check(AbortSignal.timeout(1_000));
    assert.deepEqual(lost, []);
  });
});

describe("SqlitePanelSessionStore", () => {
  panelSessionContract(async () => (await open(freshDir())).stores.panelSessions, () => randomUUID().slice(0, 8));

  it("when a session is created, then the records that expired before it are deleted, and open ones survive a reopening", async () => {
    const dataDir = freshDir();
    const first = await open(dataDir);
    const at = (hour: number) => new Date(Date.UTC(2026, 11, 2, hour));
    const record = (sessionId: string, created: number) => ({
      sessionId, role: "operator" as const, accountId: "", credentialId: "", credentialFingerprint: "fp", createdAt: at(created), expiresAt: at(created + 12),
    });
    await first.stores.panelSessions.create(record("early", 0));
    await first.stores.panelSessions.create(record("later", 6));
    await first.close();
    const second = await open(dataDir);
    assert.deepEqual(await second.stores.panelSessions.get("early"), record("early", 0), "a session outlives a restart");
    await second.stores.panelSessions.create(record("next day", 13));
    assert.equal(await second.stores.panelSessions.get("early"), undefined, "expired at 12:00, swept by the sign-in at 13:00");
    assert.ok(await second.stores.panelSessions.get("later"));
  });
});

describe("MemoryPanelSessionStore", () => {
  panelSessionContract(async () => new MemoryPanelSessionStore(), () => randomUUID().slice(0, 8));
});
