import type { HandlerContext } from "@connectrpc/connect";
import { JobStatus } from "../../../gen/generation/v1/job_pb.js";
import type { Caller } from "../auth/api-key-auth.js";
import type { CoreDeps } from "../core-deps.js";
import { ANSWER_DELIVERY } from "./answer-delivery.js";
import { cancelUnanswered } from "./cancel-job.js";
import { bareKey, type IdempotentOutcome } from "./idempotent.js";
import { jobView } from "./job-view.js";
import { waitForEnd } from "./watch-job.js";

/**
 * The answer to an accepted job. With `waitSeconds`, the job itself once it
 * finished, when that happens within the wait (a replayed request waits too).
 * While it is being made, a job whose answer cannot reach its client is canceled (cancelIfUnanswered).
 */
export async function acceptedAnswer(
  deps: CoreDeps, caller: Caller, outcome: IdempotentOutcome, idempotencyKey: string,
  waitSeconds: number | undefined, context: HandlerContext,
) {
  const handled = cancelIfUnanswered(deps, context, idempotencyKey, outcome);
  try {
    const { jobId } = outcome.response;
    const finished = waitSeconds ? await waitForEnd(deps, caller.accountId, jobId, waitSeconds * 1000, context.signal) : undefined;
    return {
      jobId,
      status: JobStatus.QUEUED,
      statusUrl: `/api/v1/jobs/${jobId}`,
      replayed: outcome.replayed,
      job: finished && jobView(finished, deps.settingsOf, deps.clock.now()),
    };
  } finally {
    handled();
  }
}

/**
 * Spec §7 rule 2 (nothing is billed for a request interrupted before a
 * response): a job accepted without an Idempotency-Key whose answer does
 * not reach its client (the call's signal aborts while the handler runs,
 * or its transport reports the answer undelivered) is canceled, its hold
 * released (cancelUnanswered): that client has no way to find it. With a
 * key the job stays; the retry with the key finds it. Returns what to call
 * once the handler is done (its signal no longer speaks for the answer).
 */
function cancelIfUnanswered(deps: CoreDeps, context: HandlerContext, idempotencyKey: string, outcome: IdempotentOutcome) {
  if (outcome.replayed || bareKey(idempotencyKey) !== "") return () => {};
  const { jobId } = outcome.response;
  let canceling = false;
  const cancel = () => {
    if (canceling) return;
    canceling = true;
    cancelUnanswered(deps, jobId).catch((error: unknown) =>
      deps.logger.error({ job_id: jobId, err: error }, "a job whose acceptance was not answered could not be canceled; it runs and is billed"),
    );
  };
  context.values.get(ANSWER_DELIVERY)?.onUndelivered(cancel);
  const signal = context.signal;
  if (signal.aborted) cancel();
  else signal.addEventListener("abort", cancel, { once: true });
  return () => signal.removeEventListener("abort", cancel);
}
