import type { Job } from "../../domain/jobs/job.js";
import type { ModelPrices } from "../../domain/pricing/price-table.js";

/**
 * A job's body as stored: JSON with money as decimal strings of picodollars
 * and dates as ISO strings. Status and lease are columns of their own, since
 * compare-and-set conditions need them.
 */
type Body = Omit<Job, "status" | "leaseOwner" | "leaseExpiresAt" | "id" | "accountId">;

const BIGINT = "$bigint:";
const DATE_FIELDS = new Set(["createdAt", "startedAt", "finishedAt"]);

export function encodeBody(job: Job): string {
  const { status: _s, leaseOwner: _o, leaseExpiresAt: _e, id: _i, accountId: _a, ...body } = job;
  return JSON.stringify(body satisfies Body, (_key, value) => (typeof value === "bigint" ? `${BIGINT}${value}` : value));
}

export function decodeJob(row: {
  job_id: string;
  account_id: string;
  status: string;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  body: string;
}): Job {
  const body = JSON.parse(row.body, (key, value) => {
    if (typeof value === "string" && value.startsWith(BIGINT)) return BigInt(value.slice(BIGINT.length));
    if (DATE_FIELDS.has(key) && typeof value === "string") return new Date(value);
    return value;
  }) as Body & { input: { prices?: ModelPrices } };
  return {
    ...body,
    id: row.job_id,
    accountId: row.account_id,
    status: row.status as Job["status"],
    leaseOwner: row.lease_owner ?? undefined,
    leaseExpiresAt: row.lease_expires_at ?? undefined,
  };
}
