import { type Interceptor } from "@connectrpc/connect";
import { type Readiness, upstreamTimeOf } from "../../core/index.js";
import { passThrough } from "../../shared/stream-step.js";
import { serverTiming } from "../server-timing.js";
import { settleFailure, wireError } from "./call-failures.js";
import { withHttpStatus } from "./http-status-detail.js";
import { SERVED_WHILE_NOT_READY } from "./method-policy.js";
import { notServing } from "./refusals.js";

/**
 * How a handler's failure leaves (unary calls, and streams that fail
 * midway). A call its client ended (a cancel, a passed deadline) is answered
 * with the signal's reason, DEADLINE_EXCEEDED or CANCELED, whatever the
 * aborted store or upstream threw (an AbortError would otherwise become
 * Connect's INTERNAL: a 500 for the client's own deadline); it is no crash
 * (the edge logs it once, at debug: createEdgeHandler). Crashes are logged
 * through our logger instead of Connect's console.error; refusals (invalid,
 * unauthenticated, …) are answers and not logged. A failure's ErrorDetail
 * leaves with its deprecated `http_status` filled (withHttpStatus: REST's
 * status for its code and reason), since the core decides no status.
 */
export function answerFailures(log: (message: string, error: unknown) => void): Interceptor {
  // Here rather than in an interceptor of its own: no extra layer around every call and stream.
  const settle = (signal: AbortSignal, method: string, error: unknown) => withHttpStatus(settleFailure(signal, method, error, log));
  return (next) => async (request) => {
    let response;
    try {
      response = await next(request);
    } catch (error) {
      throw settle(request.signal, request.method.name, error);
    }
    if (!response.stream) return response;
    return { ...response, message: settlingFailures(response.message, (error) => settle(request.signal, request.method.name, error)) };
  };
}

/** A stream's messages as they come; a failure midway is settled (answerFailures), then passed on. */
async function* settlingFailures<T>(messages: AsyncIterable<T>, settle: (error: unknown) => unknown): AsyncGenerator<T> {
  try {
    yield* messages;
  } catch (error) {
    throw settle(error);
  }
}

/**
 * Server-Timing on the core port's answers, as on the REST gateway: this service's own time and the provider's,
 * as the forwarded call reported it (upstreamTimeOf); in a unary answer's headers or a failure's, a stream's trailers.
 */
export function serverTimingOnAnswers(): Interceptor {
  return (next) => async (request) => {
    const started = performance.now();
    const stamp = (headers: Headers) => headers.set("server-timing", serverTiming(performance.now() - started, upstreamTimeOf(headers)));
    const failed = (error: unknown) => {
      const failure = wireError(error);
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

/**
 * Refuses every RPC but health's and reflection's while the process cannot serve
 * (starting, or a dependency requests need is down): UNAVAILABLE with the
 * usual ErrorDetail (service_unavailable, 503, retry-after). The edge refuses
 * such calls before reading their message; this gate covers the rest.
 */
export function readinessGate(readiness: Readiness): Interceptor {
  return (next) => async (request) => {
    if (!readiness.current.serving && !SERVED_WHILE_NOT_READY.has(request.service.typeName)) throw notServing(readiness);
    return next(request);
  };
}

