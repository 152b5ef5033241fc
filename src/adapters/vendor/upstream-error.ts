/** How an upstream call went wrong, which decides whether another route may be tried. */
export type UpstreamFailure = "connect" | "http" | "malformed" | "stalled" | "dropped" | "timeout";

export class UpstreamError extends Error {
  constructor(
    readonly failure: UpstreamFailure,
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }

  /** Connect errors, 5xx, 429, broken bodies and timeouts are the route's fault: fail over. Other 4xx are the request's. */
  get retryable(): boolean {
    if (this.failure !== "http") return true;
    return this.status === 429 || (this.status ?? 0) >= 500;
  }
}
