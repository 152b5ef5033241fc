import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { JobSchema, JobStatus, type Job as JobMessage } from "../../../gen/generation/v1/job_pb.js";
import type { Job, JobStatus as DomainStatus } from "../../domain/jobs/job.js";
import { publicState } from "../../domain/jobs/job-state-machine.js";
import { formatMoney } from "../../domain/money.js";
import type { CoreSettings } from "../core-deps.js";
import { signedResultUrl } from "./result-urls.js";

export const STATUS_TO_PROTO: Record<DomainStatus, JobStatus> = {
  queued: JobStatus.QUEUED,
  processing: JobStatus.PROCESSING,
  done: JobStatus.DONE,
  failed: JobStatus.FAILED,
  canceled: JobStatus.CANCELED,
};

/** The public view of a job; the result URL is signed anew on every read. */
export function jobView(stored: Job, settings: CoreSettings, now: Date): JobMessage {
  const job = publicState(stored);
  const isText = job.kind === "text" || job.kind === "multimodal_realtime";
  const usage = job.usage;
  const output = usage ? usage.textOutputTokens + usage.videoOutputTokens : 0;
  return create(JobSchema, {
    jobId: job.id,
    status: STATUS_TO_PROTO[job.status],
    model: job.model,
    createdAt: timestampFromDate(job.createdAt),
    startedAt: job.startedAt && timestampFromDate(job.startedAt),
    finishedAt: job.finishedAt && timestampFromDate(job.finishedAt),
    result:
      job.status === "done"
        ? {
            imageUrl: job.result?.blobKey ? signedResultUrl(settings, job.result.blobKey, now) : undefined,
            text: job.result?.text,
            mimeType: job.result?.mimeType,
          }
        : undefined,
    error: job.status === "failed" ? job.error : undefined,
    errorMessage: job.status === "failed" ? job.errorMessage : undefined,
    usage: {
      promptTokenCount: isText ? (usage?.promptTokens ?? 0) : 0,
      candidatesTokenCount: isText ? output : 0,
      totalTokenCount: isText ? (usage?.promptTokens ?? 0) + output : 0,
      reserved: formatMoney(job.reserved),
      charged: formatMoney(job.charged),
    },
    metadata: job.metadata as JobMessage["metadata"],
  });
}
