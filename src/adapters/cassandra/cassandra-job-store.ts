import { createHash } from "node:crypto";
import type { Job } from "../../domain/jobs/job.js";
import type { JobExpectation, JobStore, UnfinishedJob } from "../../ports/job-store.js";
import { AmbiguousWriteError, conditional, serialRead, type CassandraClient } from "./cassandra-session.js";
import { decodeJob, encodeBody } from "../shared/job-codec.js";

const BUCKETS = 16;
/** The status of a fence row: an id whose acceptance died before storing its job (never a job). */
const ABANDONED = "abandoned";
const COLUMNS = "job_id, account_id, status, lease_owner, lease_expires_at, body";

const bucketOf = (jobId: string) => createHash("sha1").update(jobId).digest()[0]! % BUCKETS;

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
    const ttl = next.settled && (next.status === "done" || next.status === "failed") ? ` USING TTL ${this.retentionSeconds}` : "";
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
      if (result.applied && ttl) await this.client.execute(`INSERT INTO jobs (job_id) VALUES (?)${ttl}`, [next.id]);
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
