import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { type Readiness, upstreamTimeOf } from "../../core/index.js";
import { passThrough } from "../../shared/stream-step.js";
import { serverTiming } from "../server-timing.js";
import { SERVED_WHILE_NOT_READY } from "./method-policy.js";
import { edgeFailure, isCallerFault, notServing, withHttpStatus } from "./refusals.js";

/** Node's errors for a stream or connection that is gone, as a write to it fails. */
const STREAM_GONE = new Set(["ERR_STREAM_WRITE_AFTER_END", "ERR_STREAM_DESTROYED", "ERR_HTTP2_INVALID_STREAM", "ERR_HTTP2_STREAM_ERROR", "ECONNRESET"]);

/** Whether `error` is the abort of a call its client ended (a reset, a passed deadline), or a write to the stream that went. */
function endedByClient(signal: AbortSignal, error: unknown): boolean {
  if (!signal.aborted) return false;
  if (error === signal.reason) return true;
  if (error instanceof ConnectError) return error.code === Code.Canceled || error.code === Code.DeadlineExceeded;
  return error instanceof Error && (error.name === "AbortError" || STREAM_GONE.has((error as NodeJS.ErrnoException).code ?? ""));
}

/** A call its client ended is answered with the signal's reason, not Connect's INTERNAL; crashes are logged with their stack, refusals not. */
function settleFailure(signal: AbortSignal, method: string, error: unknown, log: (message: string, error: unknown) => void): unknown {
  if (endedByClient(signal, error)) return error instanceof ConnectError ? error : ConnectError.from(signal.reason);
  const crash = !(error instanceof ConnectError) || ((error.code === Code.Internal || error.code === Code.Unknown) && !isCallerFault(error));
  if (crash) log(`${method} failed`, error);
  return error;
}

/** How a failure leaves (settleFailure), its ErrorDetail with the deprecated `http_status`, since the core decides no status. */
export function answerFailures(log: (message: string, error: unknown) => void): Interceptor {
  return (next) => async (request) => {
    const failed = (error: unknown) => withHttpStatus(settleFailure(request.signal, request.method.name, error, log));
    let response;
    try {
      response = await next(request);
    } catch (error) {
      throw failed(error);
    }
    return response.stream ? passThrough(response, { failure: failed }) : response;
  };
}

/** Server-Timing on the core port's answers, as on REST: in a unary answer's headers or a failure's, a stream's trailers. */
export function serverTimingOnAnswers(): Interceptor {
  return (next) => async (request) => {
    const started = performance.now();
    const stamp = (headers: Headers) => headers.set("server-timing", serverTiming(performance.now() - started, upstreamTimeOf(headers)));
    const failed = (error: unknown) => {
      // A crash leaves as Connect answers it: INTERNAL "internal error".
      const failure = error instanceof ConnectError ? error : edgeFailure(error);
      stamp(failure.metadata);
      return failure;
    };
    let response;
    try {
      response = await next(request);
    } catch (error) {
      throw failed(error);
    }
    if (!response.stream) {
      stamp(response.header);
      return response;
    }
    const trailer = response.trailer;
    return passThrough(response, {
      ended: (outcome) => {
        if (outcome === "done") stamp(trailer);
      },
      failure: failed,
    });
  };
}

/** Refuses every RPC but health's and reflection's while the process cannot serve; covers what the edge let through before. */
export function readinessGate(readiness: Readiness): Interceptor {
  return (next) => async (request) => {
    if (!readiness.current.serving && !SERVED_WHILE_NOT_READY.has(request.service.typeName)) throw notServing(readiness);
    return next(request);
  };
}
