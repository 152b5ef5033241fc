import { isTerminal } from "../../domain/jobs/job-state-machine.js";
import { createHash } from "node:crypto";
import type { Job } from "../../domain/jobs/job.js";
import { inListing, upperBound, type JobCursor, type JobListQuery } from "../../domain/jobs/job-list.js";
import type { JobExpectation, JobPage, JobStore, UnfinishedJob } from "../../ports/job-store.js";
import { AmbiguousWriteError, conditional, serialRead, type CassandraClient } from "./cassandra-session.js";
import { decodeJob, encodeBody } from "../shared/job-codec.js";

const BUCKETS = 16;
/** The status of a fence row: an id whose acceptance died before storing its job (never a job). */
const ABANDONED = "abandoned";
const COLUMNS = "job_id, account_id, status, lease_owner, lease_expires_at, body";

const bucketOf = (jobId: string) => createHash("sha1").update(jobId).digest()[0]! % BUCKETS;

const DAY_MS = 86_400_000;
/** The partition of jobs_by_account a job's creation time falls in: UTC days since the epoch. */
const dayOf = (date: Date) => Math.floor(date.getTime() / DAY_MS);
/** How long an index row may outlive its job's retention: far longer than any job runs (its timeout is at most 20 minutes). */
const UNFINISHED_MARGIN_SECONDS = 7 * 86_400;
/** Cassandra's largest TTL (20 years). */
const MAX_TTL_SECONDS = 630_720_000;
/** Index rows one listing page reads at most: a selective filter answers a short page with a cursor rather than scan on. */
const SCAN_BUDGET = 1_000;
/** Index rows read per query while filling a page. */
const CHUNK = 100;
/** Days of the directory read per query. */
const DAYS_CHUNK = 100;

interface IndexRow {
  readonly createdAt: Date;
  readonly jobId: string;
  readonly model: string;
}

/**
 * Jobs written only with lightweight transactions. A finished job's last write
 * (the one that shows it settled) carries the retention TTL, so it expires by
 * itself; what remains of its row then reads as no job.
 */
export class CassandraJobStore implements JobStore {
  constructor(
    private readonly client: CassandraClient,
    /** JOB_RETENTION: how long a finished job is kept. */
    private readonly retentionSeconds: number,
  ) {}

  async registerIntent(jobId: string, accountId: string, since: Date): Promise<void> {
    await this.client.execute("INSERT INTO unfinished_jobs (bucket, job_id, account_id, since) VALUES (?, ?, ?, ?)", [
      bucketOf(jobId), jobId, accountId, since,
    ]);
  }

  async create(job: Job): Promise<void> {
    // Listed before it is stored, so a stored job is never missing from the listing (a row without its job is skipped).
    await this.index(job, "created");
    try {
      const result = await conditional(
        this.client,
        `INSERT INTO jobs (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS`,
        [job.id, job.accountId, job.status, job.leaseOwner ?? null, job.leaseExpiresAt ?? null, encodeBody(job)],
      );
      if (!result.applied) throw new Error(`job ${job.id} exists`);
    } catch (error) {
      if (!(error instanceof AmbiguousWriteError)) throw error;
      const stored = await this.serialGet(job.id);
      if (!stored || encodeBody(stored) !== encodeBody(job)) throw error;
    }
  }

  async abandonIntent(jobId: string): Promise<boolean> {
    try {
      const result = await conditional(this.client, `INSERT INTO jobs (job_id, status, body) VALUES (?, '${ABANDONED}', '{}') IF NOT EXISTS`, [jobId]);
      return result.applied || result.current?.status === ABANDONED;
    } catch (error) {
      if (!(error instanceof AmbiguousWriteError)) throw error;
      const row = await serialRead(this.client, "SELECT status FROM jobs WHERE job_id = ?", [jobId]);
      return row?.status === ABANDONED;
    }
  }

  async get(jobId: string): Promise<Job | undefined> {
    const row = (await this.client.execute(`SELECT ${COLUMNS} FROM jobs WHERE job_id = ?`, [jobId])).first();
    return row && isJob(row.status) ? decodeJob(row as never) : undefined;
  }

  async transition(next: Job, expected: JobExpectation): Promise<boolean> {
    const withOwner = expected.leaseOwner !== undefined;
    // The last step of a job starts its retention.
    const ttl = next.settled && isTerminal(next.status) ? ` USING TTL ${this.retentionSeconds}` : "";
    try {
      const result = await conditional(
        this.client,
        `UPDATE jobs${ttl} SET account_id = ?, status = ?, lease_owner = ?, lease_expires_at = ?, body = ? WHERE job_id = ? IF status = ?${withOwner ? " AND lease_owner = ?" : ""}`,
        [
          next.accountId, next.status, next.leaseOwner ?? null, next.leaseExpiresAt ?? null, encodeBody(next), next.id, expected.status,
          ...(withOwner ? [expected.leaseOwner] : []),
        ],
      );
      // The row's marker (written by create, without a TTL) expires with it, so nothing of the job is left.
      if (result.applied && ttl) {
        await this.client.execute(`INSERT INTO jobs (job_id) VALUES (?)${ttl}`, [next.id]);
        await this.index(next, "finished");
      }
      return result.applied;
    } catch (error) {
      if (!(error instanceof AmbiguousWriteError)) throw error;
      // Applied if the job now is exactly what we wrote (the serial read completes any in-flight round).
      const stored = await this.serialGet(next.id);
      return !!stored && stored.status === next.status && stored.leaseOwner === next.leaseOwner && encodeBody(stored) === encodeBody(next);
    }
  }

  async renewLease(jobId: string, owner: string, expiresAt: Date): Promise<boolean> {
    try {
      const result = await conditional(
        this.client,
        "UPDATE jobs SET lease_expires_at = ? WHERE job_id = ? IF status = 'processing' AND lease_owner = ?",
        [expiresAt, jobId, owner],
      );
      return result.applied;
    } catch (error) {
      if (!(error instanceof AmbiguousWriteError)) throw error;
      const stored = await this.serialGet(jobId);
      return stored?.status === "processing" && stored.leaseOwner === owner;
    }
  }

  /** Pages through the buckets in order; the cursor is "<bucket>:<last job id>". */
  async listUnfinished(limit: number, after?: string): Promise<{ entries: UnfinishedJob[]; next?: string }> {
    const entries: { jobId: string; accountId: string; since: Date }[] = [];
    let [bucket, lastId] = after ? [Number(after.split(":")[0]), after.slice(after.indexOf(":") + 1)] : [0, ""];
    let next: string | undefined;
    while (bucket < BUCKETS) {
      const rows = await this.client.execute(
        "SELECT job_id, account_id, since FROM unfinished_jobs WHERE bucket = ? AND job_id > ? LIMIT ?",
        [bucket, lastId, limit - entries.length],
      );
      entries.push(...rows.rows.map((r) => ({ jobId: r.job_id as string, accountId: r.account_id as string, since: r.since as Date })));
      if (entries.length >= limit) {
        next = `${bucket}:${entries[entries.length - 1]!.jobId}`;
        break;
      }
      bucket++;
      lastId = "";
    }
    return { entries: await Promise.all(entries.map(async (entry) => ({ ...entry, job: await this.get(entry.jobId) }))), next };
  }

  async markFinalized(jobId: string): Promise<void> {
    await this.client.execute("DELETE FROM unfinished_jobs WHERE bucket = ? AND job_id = ?", [bucketOf(jobId), jobId]);
  }

  /**
   * Writes the job's rows of jobs_by_account and job_days_by_account (both
   * idempotent upserts). At creation both live JOB_RETENTION + a margin (an
   * index row whose job was never stored goes by itself); at the last step the
   * index row gets the job's own TTL, and its day outlives it.
   */
  private async index(job: Job, step: "created" | "finished"): Promise<void> {
    const long = Math.min(this.retentionSeconds + UNFINISHED_MARGIN_SECONDS, MAX_TTL_SECONDS);
    const rowTtl = step === "finished" ? this.retentionSeconds : long;
    const day = dayOf(job.createdAt);
    await Promise.all([
      this.client.execute(
        `INSERT INTO jobs_by_account (account_id, day, created_at, job_id, model) VALUES (?, ?, ?, ?, ?) USING TTL ${rowTtl}`,
        [job.accountId, day, job.createdAt, job.id, job.model],
      ),
      this.client.execute(`INSERT INTO job_days_by_account (account_id, day) VALUES (?, ?) USING TTL ${long}`, [job.accountId, day]),
    ]);
  }

  /**
   * Walks the account's days newest first (job_days_by_account), and in each
   * day its index rows below the upper bound, reading each job's row for its
   * status and body; stops at created_after, at limit + 1 matches, or after
   * SCAN_BUDGET index rows (then the cursor is the last row read).
   */
  async listByAccount(query: JobListQuery): Promise<JobPage> {
    const upper = upperBound(query);
    const after = query.createdAfter?.getTime();
    const matches: Job[] = [];
    let scanned = 0;
    /** The last index row read: where the next page starts when the budget ends this one. */
    let cursor: JobCursor | undefined;
    for await (const day of this.days(query.accountId, upper && dayOf(upper.createdAt), query.createdAfter && dayOf(query.createdAfter))) {
      // Only the upper bound's own day needs it; older days are wholly below.
      let below = upper !== undefined && dayOf(upper.createdAt) === day ? upper : undefined;
      while (true) {
        if (scanned >= SCAN_BUDGET) return { jobs: matches, next: cursor };
        const rows = await this.indexRows(query.accountId, day, below, Math.min(CHUNK, SCAN_BUDGET - scanned));
        // Rows come newest first: from the first at or below created_after on, nothing can match.
        const inRange = after === undefined ? rows : rows.filter((row) => row.createdAt.getTime() > after);
        scanned += inRange.length;
        const tail = inRange[inRange.length - 1];
        if (tail) cursor = below = { createdAt: tail.createdAt, jobId: tail.jobId };
        const wanted = inRange.filter((row) => query.model === undefined || row.model === query.model);
        const jobs = await Promise.all(wanted.map((row) => this.get(row.jobId)));
        // A row whose job was never stored, or has expired, reads as no job and is skipped.
        for (const job of jobs) if (job && inListing(job, query)) matches.push(job);
        if (matches.length > query.limit || inRange.length < rows.length) return this.page(matches, query.limit);
        if (rows.length < CHUNK) break;
      }
    }
    return this.page(matches, query.limit);
  }

  private page(matches: Job[], limit: number): JobPage {
    const jobs = matches.slice(0, limit);
    const tail = jobs[jobs.length - 1];
    return { jobs, next: matches.length > limit && tail ? { createdAt: tail.createdAt, jobId: tail.id } : undefined };
  }

  /** The days holding the account's jobs, newest first, from `highest` down to `lowest` (inclusive, each when given). */
  private async *days(accountId: string, highest: number | undefined, lowest: number | undefined): AsyncGenerator<number> {
    let top = highest;
    while (true) {
      const bounds = [...(top === undefined ? [] : [top]), ...(lowest === undefined ? [] : [lowest])];
      const rows = await this.client.execute(
        `SELECT day FROM job_days_by_account WHERE account_id = ?${top === undefined ? "" : " AND day <= ?"}${lowest === undefined ? "" : " AND day >= ?"} LIMIT ${DAYS_CHUNK}`,
        [accountId, ...bounds],
      );
      for (const row of rows.rows) yield row.day as number;
      if (rows.rows.length < DAYS_CHUNK) return;
      top = (rows.rows[rows.rows.length - 1]!.day as number) - 1;
    }
  }

  /** Up to `limit` index rows of one day, newest first, strictly below `below` when given. */
  private async indexRows(accountId: string, day: number, below: JobCursor | undefined, limit: number): Promise<IndexRow[]> {
    if (limit <= 0) return [];
    const result = await this.client.execute(
      `SELECT created_at, job_id, model FROM jobs_by_account WHERE account_id = ? AND day = ?${below ? " AND (created_at, job_id) < (?, ?)" : ""} LIMIT ${limit}`,
      [accountId, day, ...(below ? [below.createdAt, below.jobId] : [])],
    );
    return result.rows.map((row) => ({ createdAt: row.created_at as Date, jobId: row.job_id as string, model: row.model as string }));
  }

  private async serialGet(jobId: string): Promise<Job | undefined> {
    const row = await serialRead(this.client, `SELECT ${COLUMNS} FROM jobs WHERE job_id = ?`, [jobId]);
    return row && isJob(row.status) ? decodeJob(row as never) : undefined;
  }

  /** Finished jobs expire by the TTL of their last write. */
  async purgeFinished(): Promise<number> {
    return 0;
  }
}

/** A fence row is no job, and neither is a row whose cells expired (only its key is left). */
const isJob = (status: unknown) => typeof status === "string" && status !== ABANDONED;
