/** An error the gateway raises itself, before the core is involved (malformed JSON, wrong types). */
export class GatewayError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}
