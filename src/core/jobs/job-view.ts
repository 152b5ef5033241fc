import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { JobSchema, JobStatus, type Job as JobMessage } from "../../../gen/generation/v1/job_pb.js";
import type { Job, JobStatus as DomainStatus } from "../../domain/jobs/job.js";
import { publicState } from "../../domain/jobs/job-state-machine.js";
import { formatMoney } from "../../domain/money.js";
import type { CoreSettings } from "../core-deps.js";
import { signedResultUrl } from "./result-urls.js";
import { deepFreeze } from "../../shared/deep-freeze.js";

export const STATUS_TO_PROTO: Record<DomainStatus, JobStatus> = {
  queued: JobStatus.QUEUED,
  processing: JobStatus.PROCESSING,
  done: JobStatus.DONE,
  failed: JobStatus.FAILED,
  canceled: JobStatus.CANCELED,
};

/**
 * Views made lately, per stored job object. A store that hands out frozen
 * jobs (SQLite's recent jobs) hands the same object to every poll of an
 * unchanged job, and a new object once it changes; the view differs only in
 * its result URL's expiry, which moves each second. A view is reused within
 * its second and is frozen itself, so no caller can change what the next one
 * gets (decision 0023).
 */
const recentViews = new WeakMap<Job, { readonly second: number; readonly settings: CoreSettings; readonly view: JobMessage }>();

/** The public view of a job; the result URL is signed for the current second on every read. */
export function jobView(stored: Job, settings: CoreSettings, now: Date): JobMessage {
  if (!Object.isFrozen(stored)) return makeView(stored, settings, now);
  const second = Math.floor(now.getTime() / 1000);
  const recent = recentViews.get(stored);
  if (recent && recent.second === second && recent.settings === settings) return recent.view;
  const view = deepFreeze(makeView(stored, settings, now));
  recentViews.set(stored, { second, settings, view });
  return view;
}

function makeView(stored: Job, settings: CoreSettings, now: Date): JobMessage {
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
    // A failed job's error; a canceled one's reason when it was not its owner's cancel (client_gone).
    error: job.status === "failed" || job.status === "canceled" ? job.error : undefined,
    errorMessage: job.status === "failed" || job.status === "canceled" ? job.errorMessage : undefined,
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
