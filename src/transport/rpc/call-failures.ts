import { Code, ConnectError } from "@connectrpc/connect";
import { isCallerFault } from "./refusals.js";

/** Node's errors for a stream or connection that is gone, as a write to it fails (see connectErrorFromNodeReason). */
const STREAM_GONE = new Set(["ERR_STREAM_WRITE_AFTER_END", "ERR_STREAM_DESTROYED", "ERR_HTTP2_INVALID_STREAM", "ERR_HTTP2_STREAM_ERROR", "ECONNRESET"]);

/**
 * Whether `error` ended a call because its client did: the call's signal is
 * aborted (the client reset the stream or the connection, or its deadline
 * passed) and the error is that abort (the signal's reason, an AbortError
 * from whatever the handler was awaiting, Connect's Canceled or
 * DeadlineExceeded) or a write to the stream that is gone.
 */
function endedByClient(signal: AbortSignal, error: unknown): boolean {
  if (!signal.aborted) return false;
  if (error === signal.reason) return true;
  if (error instanceof ConnectError) return error.code === Code.Canceled || error.code === Code.DeadlineExceeded;
  return error instanceof Error && (error.name === "AbortError" || STREAM_GONE.has((error as NodeJS.ErrnoException).code ?? ""));
}

/**
 * What a handler's failure becomes on the wire, whichever library serves the
 * protocol. A call its client ended (a cancel, a passed deadline) is answered
 * with the signal's reason, DEADLINE_EXCEEDED or CANCELED, whatever the
 * aborted store or upstream threw; it is no crash. Crashes (anything not a
 * ConnectError, INTERNAL, UNKNOWN) are logged with their stack through `log`;
 * refusals (invalid, unauthenticated, …) are answers and are not logged.
 */
export function settleFailure(signal: AbortSignal, method: string, error: unknown, log: (message: string, error: unknown) => void): unknown {
  if (endedByClient(signal, error)) return error instanceof ConnectError ? error : ConnectError.from(signal.reason);
  const crash = !(error instanceof ConnectError) || ((error.code === Code.Internal || error.code === Code.Unknown) && !isCallerFault(error));
  if (crash) log(`${method} failed`, error);
  return error;
}

/**
 * A failure as it may leave for the client: a ConnectError as it is; anything
 * else (a crash) as INTERNAL "internal error", its message kept out of the
 * wire, as Connect's handlers answer it. For the edges that touch a failure
 * before Connect does (grpc-js's statuses, the core port's Server-Timing).
 */
export function wireError(error: unknown): ConnectError {
  return error instanceof ConnectError ? error : new ConnectError("internal error", Code.Internal, undefined, undefined, error);
}
