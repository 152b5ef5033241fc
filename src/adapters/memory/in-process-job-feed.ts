import type { JobFeed, JobSignal } from "../../ports/job-feed.js";

/** The job feed of one process (the embedded default): signals reach this process's listeners on a later tick. */
export class InProcessJobFeed implements JobFeed {
  private readonly listeners = new Set<(signal: JobSignal) => void>();
  private closed = false;

  async publish(signal: JobSignal): Promise<void> {
    if (this.closed) return;
    // Later: a publisher never runs listeners' code inside its own step.
    setImmediate(() => {
      for (const listener of [...this.listeners]) {
        try {
          listener(signal);
        } catch {
          // a listener's failure is its own; the others still hear the signal
        }
      }
    });
  }

  listen(handler: (signal: JobSignal) => void): () => void {
    this.listeners.add(handler);
    return () => void this.listeners.delete(handler);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
  }
}
