import type { Job } from "../../domain/jobs/job.js";
import { webhookMessageId } from "../../domain/webhooks/payload.js";
import { upperBound, type JobListQuery } from "../../domain/jobs/job-list.js";
import type { JobExpectation, JobPage, JobStore, UnfinishedJob } from "../../ports/job-store.js";
import { decodeJob, encodeBody } from "../shared/job-codec.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";
import { deepFreeze } from "../../shared/deep-freeze.js";

interface JobRow {
  job_id: string;
  account_id: string;
  status: string;
  lease_owner: string | null;
  lease_expires_at: number | null;
  body: string;
}

interface UnfinishedRow {
  job_id: string;
  account_id: string;
  since: number;
  status: string | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  body: string | null;
}

const COLUMNS = "job_id, account_id, status, lease_owner, lease_expires_at, body";

const toJob = (row: JobRow): Job =>
  decodeJob({ ...row, lease_expires_at: row.lease_expires_at === null ? null : new Date(row.lease_expires_at) });

const millis = (date: Date | undefined): number | null => (date === undefined ? null : date.getTime());

function jobOperations(db: SqliteDb, now: () => number) {
  const s = {
    get: db.prepare(`SELECT ${COLUMNS} FROM jobs WHERE job_id = ?`),
    exists: db.prepare("SELECT 1 FROM jobs WHERE job_id = ?").pluck(),
    fenced: db.prepare("SELECT 1 FROM job_fences WHERE job_id = ?").pluck(),
    fence: db.prepare("INSERT OR IGNORE INTO job_fences (job_id, fenced_at) VALUES (?, ?)"),
    insert: db.prepare(
      `INSERT INTO jobs (${COLUMNS}, finished_at, created_at, model)
       VALUES (@job_id, @account_id, @status, @lease_owner, @lease_expires_at, @body, @finished_at, @created_at, @model)`,
    ),
    transition: db.prepare(
      `UPDATE jobs SET status = @status, lease_owner = @lease_owner, lease_expires_at = @lease_expires_at, body = @body,
         finished_at = @finished_at
       WHERE job_id = @job_id AND status = @expected_status`,
    ),
    transitionOwned: db.prepare(
      `UPDATE jobs SET status = @status, lease_owner = @lease_owner, lease_expires_at = @lease_expires_at, body = @body,
         finished_at = @finished_at
       WHERE job_id = @job_id AND status = @expected_status AND lease_owner = @expected_owner`,
    ),
    renew: db.prepare("UPDATE jobs SET lease_expires_at = ? WHERE job_id = ? AND status = 'processing' AND lease_owner = ?"),
    register: db.prepare("INSERT OR REPLACE INTO unfinished_jobs (job_id, account_id, since) VALUES (?, ?, ?)"),
    finalize: db.prepare("DELETE FROM unfinished_jobs WHERE job_id = ?"),
    unfinished: db.prepare(
      `SELECT u.job_id, u.account_id, u.since, j.status, j.lease_owner, j.lease_expires_at, j.body
       FROM unfinished_jobs u LEFT JOIN jobs j ON j.job_id = u.job_id
       WHERE u.job_id > ? ORDER BY u.job_id LIMIT ?`,
    ),
    purgeable: db.prepare(
      `SELECT job_id, status FROM jobs
       WHERE status IN ('done', 'failed', 'canceled') AND finished_at < ?
         AND NOT EXISTS (SELECT 1 FROM unfinished_jobs u WHERE u.job_id = jobs.job_id)
       ORDER BY finished_at LIMIT ?`,
    ),
    // One range scan of jobs_by_account (the account, then below the cursor); absent filters are NULL and match all.
    // The status filter is on the status clients see: a decided job not yet settled is still processing (publicState).
    byAccount: db.prepare(
      `SELECT ${COLUMNS} FROM jobs
       WHERE account_id = @account_id AND (created_at, job_id) < (@before_at, @before_id)
         AND (@after_at IS NULL OR created_at > @after_at)
         AND (@status IS NULL OR @status = CASE
               WHEN status IN ('done', 'failed', 'canceled') AND json_extract(body, '$.settled') IS NOT 1 THEN 'processing' ELSE status END)
         AND (@model IS NULL OR model = @model)
       ORDER BY created_at DESC, job_id DESC LIMIT @limit`,
    ),
    deleteJob: db.prepare("DELETE FROM jobs WHERE job_id = ?"),
    deleteDeliveries: db.prepare("DELETE FROM webhook_deliveries WHERE job_id = ? OR message_id = ?"),
  };

  const row = (job: Job) => ({
    job_id: job.id,
    account_id: job.accountId,
    status: job.status,
    lease_owner: job.leaseOwner ?? null,
    lease_expires_at: millis(job.leaseExpiresAt),
    finished_at: millis(job.finishedAt),
    body: encodeBody(job),
    created_at: job.createdAt.getTime(),
    model: job.model,
  });

  const createTx = db.transaction((job: Job) => {
    if (s.fenced.get(job.id)) throw new Error(`job ${job.id} was abandoned: its acceptance was fenced off`);
    if (s.exists.get(job.id)) throw new Error(`job ${job.id} exists`);
    s.insert.run(row(job));
  });

  const abandonTx = db.transaction((jobId: string): boolean => {
    if (s.exists.get(jobId)) return false;
    s.fence.run(jobId, now());
    return true;
  });

  const purgeTx = db.transaction((before: number, limit: number): number => {
    const victims = s.purgeable.all(before, limit) as { job_id: string; status: Job["status"] }[];
    for (const victim of victims) {
      // Deliveries finished before their first attempt was recorded may carry no job id: match the message id too.
      s.deleteDeliveries.run(victim.job_id, webhookMessageId({ id: victim.job_id, status: victim.status } as Job));
      s.deleteJob.run(victim.job_id);
    }
    return victims.length;
  });

  return { s, row, createTx, abandonTx, purgeTx };
}

/** How many decoded jobs a store keeps (a few MB): the jobs being polled. */
const RECENT_JOBS = 2_048;

/**
 * Jobs on SQLite. Every change is one statement or IMMEDIATE transaction whose
 * WHERE clause is the compare-and-set condition (status, and lease owner when
 * given). Fences live in their own table: create() of a fenced id throws.
 */
export class SqliteJobStore implements JobStore {
  private readonly ops: ReturnType<typeof jobOperations>;
  /**
   * Jobs read lately, decoded and frozen, most recent last: polling reads the
   * same jobs again and again, and reading and decoding a row is dear
   * (decision 0023). Exact, as the settings cache: this
   * process alone opens the database, and every write of a job drops its entry.
   */
  private readonly recent = new Map<string, Job>();

  constructor(
    db: SqliteDb,
    now: () => number = Date.now,
    private readonly recentLimit = RECENT_JOBS,
  ) {
    this.ops = jobOperations(db, now);
  }

  private forget(jobId: string): void {
    this.recent.delete(jobId);
  }

  async registerIntent(jobId: string, accountId: string, since: Date): Promise<void> {
    sqliteCall(() => this.registerIntentNow(jobId, accountId, since));
  }

  /** registerIntent's write, synchronous: for a caller's transaction on the same database (SqliteIntentHolds). */
  registerIntentNow(jobId: string, accountId: string, since: Date): void {
    this.ops.s.register.run(jobId, accountId, since.getTime());
  }

  async create(job: Job): Promise<void> {
    this.forget(job.id);
    sqliteCall(() => this.ops.createTx.immediate(job));
  }

  /**
   * create's write, synchronous, for a caller's transaction on the same
   * database (SqliteAcceptanceWrites): "fenced" or "exists" where create
   * would throw, and nothing written then.
   */
  createNow(job: Job): "created" | "fenced" | "exists" {
    this.forget(job.id);
    if (this.ops.s.fenced.get(job.id)) return "fenced";
    if (this.ops.s.exists.get(job.id)) return "exists";
    this.ops.s.insert.run(this.ops.row(job));
    return "created";
  }

  async abandonIntent(jobId: string): Promise<boolean> {
    return sqliteCall(() => this.ops.abandonTx.immediate(jobId));
  }

  async get(jobId: string): Promise<Job | undefined> {
    const known = this.recent.get(jobId);
    if (known) {
      this.recent.delete(jobId); // to the most recent end
      this.recent.set(jobId, known);
      return known;
    }
    const row = sqliteCall(() => this.ops.s.get.get(jobId)) as JobRow | undefined;
    if (!row) return undefined;
    const job = deepFreeze(toJob(row));
    this.recent.set(jobId, job);
    if (this.recent.size > this.recentLimit) this.recent.delete(this.recent.keys().next().value!);
    return job;
  }

  async transition(next: Job, expected: JobExpectation): Promise<boolean> {
    this.forget(next.id);
    const params = { ...this.ops.row(next), expected_status: expected.status };
    const result = sqliteCall(() =>
      expected.leaseOwner === undefined
        ? this.ops.s.transition.run(params)
        : this.ops.s.transitionOwned.run({ ...params, expected_owner: expected.leaseOwner }),
    );
    return result.changes === 1;
  }

  async renewLease(jobId: string, owner: string, expiresAt: Date): Promise<boolean> {
    this.forget(jobId);
    return sqliteCall(() => this.ops.s.renew.run(expiresAt.getTime(), jobId, owner)).changes === 1;
  }

  /** Pages in job id order; the cursor is the last id of the page. */
  async listUnfinished(limit: number, after?: string): Promise<{ entries: UnfinishedJob[]; next?: string }> {
    if (limit <= 0) return { entries: [] };
    const rows = sqliteCall(() => this.ops.s.unfinished.all(after ?? "", limit + 1)) as UnfinishedRow[];
    const more = rows.length > limit;
    const entries = rows.slice(0, limit).map((row): UnfinishedJob => ({
      jobId: row.job_id,
      accountId: row.account_id,
      since: new Date(row.since),
      job: row.body === null ? undefined : toJob({ ...row, account_id: row.account_id, status: row.status!, body: row.body }),
    }));
    return { entries, next: more ? entries[entries.length - 1]!.jobId : undefined };
  }

  async markFinalized(jobId: string): Promise<void> {
    sqliteCall(() => this.markFinalizedNow(jobId));
  }

  /** markFinalized's write, synchronous: for a caller's transaction on the same database (SqliteIntentHolds). */
  markFinalizedNow(jobId: string): void {
    this.ops.s.finalize.run(jobId);
  }

  async listByAccount(query: JobListQuery): Promise<JobPage> {
    const upper = upperBound(query);
    const rows = sqliteCall(() =>
      this.ops.s.byAccount.all({
        account_id: query.accountId,
        before_at: upper?.createdAt.getTime() ?? Number.MAX_SAFE_INTEGER,
        before_id: upper?.jobId ?? "",
        after_at: query.createdAfter?.getTime() ?? null,
        status: query.status ?? null,
        model: query.model ?? null,
        limit: query.limit + 1,
      }),
    ) as JobRow[];
    const jobs = rows.slice(0, query.limit).map(toJob);
    const last = jobs[jobs.length - 1];
    return { jobs, next: rows.length > query.limit && last ? { createdAt: last.createdAt, jobId: last.id } : undefined };
  }

  async purgeFinished(finishedBefore: Date, limit: number): Promise<number> {
    if (limit <= 0) return 0;
    const purged = sqliteCall(() => this.ops.purgeTx.immediate(finishedBefore.getTime(), Math.floor(limit)));
    if (purged > 0) this.recent.clear(); // finished jobs only, and rarely: start over rather than list them
    return purged;
  }
}
