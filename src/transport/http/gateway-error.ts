/** An error the gateway raises itself, before the core is involved (malformed JSON, wrong types, edge limits). */
export class GatewayError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
    /** Sent as Retry-After when set (429, 503). */
    readonly retryAfterSeconds?: number,
    /** The request parameter at fault, where the surface's error names one (OpenAI's `param`). */
    readonly param?: string,
  ) {
    super(message);
  }
}
