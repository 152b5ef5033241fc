import { timestampDate } from "@bufbuild/protobuf/wkt";
import { JobStatus } from "../../../gen/generation/v1/job_pb.js";
import type { ListJobsRequest } from "../../../gen/generation/v1/generation_service_pb.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import { encodePageToken, parseJobListQuery } from "../../domain/jobs/job-list.js";
import type { Clock } from "../../ports/clock.js";
import type { JobStore } from "../../ports/job-store.js";
import type { Caller } from "../auth/api-key-auth.js";
import type { CoreSettings } from "../core-deps.js";
import { jobView, STATUS_TO_PROTO } from "./job-view.js";

/** The ids this service gives its jobs. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether the text is a job id this service could have given. */
export const isJobId = (jobId: string) => UUID.test(jobId);

export const jobNotFound = (jobId: string) => new DomainError("not_found", "job_not_found", `no job ${jobId}`);

/** The domain's name of a status filter; an undefined enum number passes as itself, for the domain to refuse. */
const STATUS_FILTER = new Map<number, string>(Object.entries(STATUS_TO_PROTO).map(([name, value]) => [value, name]));
const statusFilter = (status: JobStatus) => (status === JobStatus.UNSPECIFIED ? undefined : (STATUS_FILTER.get(status) ?? String(status)));

/** One of the caller's jobs, or 404: another account's job is indistinguishable from an unknown one. */
export async function ownJob(jobs: Pick<JobStore, "get">, caller: Caller, jobId: string) {
  const job = isJobId(jobId) ? await jobs.get(jobId.toLowerCase()) : undefined;
  if (!job || job.accountId !== caller.accountId) throw jobNotFound(jobId);
  return job;
}

/** A page of the caller's jobs, newest first, with the token of the next. */
export async function listOwnJobs(
  deps: { readonly jobs: Pick<JobStore, "listByAccount">; readonly settingsOf: CoreSettings; readonly clock: Clock },
  caller: Caller, request: ListJobsRequest,
) {
  const settings = deps.settingsOf;
  // Every rule (bounds, filters, the token's integrity) is the domain's; the store only reads.
  const query = parseJobListQuery(settings.urlSigningSecret, caller.accountId, {
    status: statusFilter(request.status),
    model: request.model === "" ? undefined : request.model,
    createdAfter: request.createdAfter && timestampDate(request.createdAfter),
    createdBefore: request.createdBefore && timestampDate(request.createdBefore),
    limit: request.limit,
    pageToken: request.pageToken === "" ? undefined : request.pageToken,
  });
  const page = await deps.jobs.listByAccount(query);
  const now = deps.clock.now();
  return {
    jobs: page.jobs.map((job) => jobView(job, settings, now)),
    nextPageToken: page.next ? encodePageToken(settings.urlSigningSecret, caller.accountId, query, page.next) : "",
  };
}
