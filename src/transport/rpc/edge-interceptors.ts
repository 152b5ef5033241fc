import { type Interceptor } from "@connectrpc/connect";
import { type Readiness, upstreamTimeOf } from "../../core/index.js";
import { passThrough } from "../../shared/stream-step.js";
import { serverTiming } from "../server-timing.js";
import { settleFailure, wireError } from "./call-failures.js";
import { withHttpStatus } from "./http-status-detail.js";
import { SERVED_WHILE_NOT_READY } from "./method-policy.js";
import { notServing } from "./refusals.js";

/**
 * How a failure leaves (settleFailure): a call its client ended gets the signal's reason, not Connect's INTERNAL; crashes
 * go to our log. Its ErrorDetail gets the deprecated `http_status` (withHttpStatus), since the core decides no status.
 */
export function answerFailures(log: (message: string, error: unknown) => void): Interceptor {
  // Here rather than in an interceptor of its own: no extra layer around every call and stream.
  const settle = (signal: AbortSignal, method: string, error: unknown) => withHttpStatus(settleFailure(signal, method, error, log));
  return (next) => async (request) => {
    const failed = (error: unknown) => settle(request.signal, request.method.name, error);
    let response;
    try {
      response = await next(request);
    } catch (error) {
      throw failed(error);
    }
    return response.stream ? passThrough(response, { failure: failed }) : response;
  };
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

/** Refuses every RPC but health's and reflection's while the process cannot serve (notServing); covers what the edge let through before. */
export function readinessGate(readiness: Readiness): Interceptor {
  return (next) => async (request) => {
    if (!readiness.current.serving && !SERVED_WHILE_NOT_READY.has(request.service.typeName)) throw notServing(readiness);
    return next(request);
  };
}

