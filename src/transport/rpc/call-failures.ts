import { Code, ConnectError } from "@connectrpc/connect";
import { edgeFailure, isCallerFault } from "./refusals.js";

/** Node's errors for a stream or connection that is gone, as a write to it fails (see connectErrorFromNodeReason). */
const STREAM_GONE = new Set(["ERR_STREAM_WRITE_AFTER_END", "ERR_STREAM_DESTROYED", "ERR_HTTP2_INVALID_STREAM", "ERR_HTTP2_STREAM_ERROR", "ECONNRESET"]);

/** Whether `error` is the abort of a call its client ended (a reset, a passed deadline), or a write to the stream that went. */
function endedByClient(signal: AbortSignal, error: unknown): boolean {
  if (!signal.aborted) return false;
  if (error === signal.reason) return true;
  if (error instanceof ConnectError) return error.code === Code.Canceled || error.code === Code.DeadlineExceeded;
  return error instanceof Error && (error.name === "AbortError" || STREAM_GONE.has((error as NodeJS.ErrnoException).code ?? ""));
}

/**
 * A handler's failure as it leaves, whichever library serves the protocol: a call its client ended is answered
 * with the signal's reason, whatever the aborted work threw; crashes are logged with their stack, refusals are not.
 */
export function settleFailure(signal: AbortSignal, method: string, error: unknown, log: (message: string, error: unknown) => void): unknown {
  if (endedByClient(signal, error)) return error instanceof ConnectError ? error : ConnectError.from(signal.reason);
  const crash = !(error instanceof ConnectError) || ((error.code === Code.Internal || error.code === Code.Unknown) && !isCallerFault(error));
  if (crash) log(`${method} failed`, error);
  return error;
}

/** A failure as it may leave for the client: a crash as INTERNAL "internal error" (as Connect answers it), for edges that touch it first. */
export const wireError = (error: unknown): ConnectError => (error instanceof ConnectError ? error : edgeFailure(error));
