import type { JobFeed } from "../../ports/job-feed.js";

/**
 * Hears the changes of one job through the feed. `next` resolves at the
 * first change signalled since the previous call (none is missed between
 * calls), after `fallbackMs` (a signal may be lost: the caller reads the
 * store anyway), or when `abort` fires.
 */
export function followJob(feed: JobFeed, jobId: string) {
  let signalled = false;
  let wake: (() => void) | undefined;
  const stop = feed.listen((signal) => {
    if (signal.kind !== "changed" || signal.jobId !== jobId) return;
    signalled = true;
    wake?.();
  });
  return {
    async next(fallbackMs: number, abort?: AbortSignal): Promise<void> {
      if (!signalled && !abort?.aborted) {
        let timer: NodeJS.Timeout | undefined;
        let onAbort: (() => void) | undefined;
        await new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, Math.max(0, fallbackMs));
          onAbort = () => resolve();
          abort?.addEventListener("abort", onAbort, { once: true });
        });
        clearTimeout(timer);
        if (onAbort) abort?.removeEventListener("abort", onAbort);
        wake = undefined;
      }
      signalled = false;
    },
    close: stop,
  };
}
