export interface WebhookAttemptResult {
  /** HTTP status, or undefined when no answer came (refused, timeout, blocked address). */
  readonly status?: number;
  readonly error?: string;
}

/** Sends one signed webhook request. */
export interface WebhookTransport {
  post(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<WebhookAttemptResult>;
}
