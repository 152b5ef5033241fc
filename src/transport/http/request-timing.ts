import { ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";
import type { FastifyRequest } from "fastify";
import { upstreamTimeOf } from "../../core/index.js";
import { passThrough } from "../../shared/stream-step.js";

/** Where a request's time went: since its arrival, waiting for the core, and waiting for the provider (when it was called). */
export interface RequestTiming {
  readonly startedAt: number;
  coreMs: number;
  upstreamMs?: number;
}

const TIMING = Symbol("requestTiming");
type Timed = FastifyRequest & { [TIMING]?: RequestTiming };

/** Starts the clock of a request (the gateway's first hook). */
export function startTiming(request: FastifyRequest): RequestTiming {
  const timing: RequestTiming = { startedAt: performance.now(), coreMs: 0 };
  (request as Timed)[TIMING] = timing;
  return timing;
}

export const timingOf = (request: FastifyRequest): RequestTiming | undefined => (request as Timed)[TIMING];

/** The timing of the request a core call is made for (set by the gateway's call options). */
export const REQUEST_TIMING = createContextKey<RequestTiming | undefined>(undefined, { description: "the gateway request's timing" });

/** A gateway request's core time (a unary call's, a stream's waits) and the provider's time its calls report (upstreamTimeOf). */
export const coreTime: Interceptor = (next) => async (request) => {
  const timing = request.contextValues.get(REQUEST_TIMING);
  if (!timing) return next(request);
  let reported = 0;
  // Each report is the call's total so far: only what is new is added.
  const report = (headers: Headers) => {
    const ms = upstreamTimeOf(headers);
    if (ms === undefined || ms <= reported) return;
    timing.upstreamMs = (timing.upstreamMs ?? 0) + ms - reported;
    reported = ms;
  };
  let waitFrom = performance.now();
  const waited = () => {
    const now = performance.now();
    timing.coreMs += now - waitFrom;
    waitFrom = now;
  };
  let response;
  try {
    response = await next(request);
  } catch (error) {
    if (error instanceof ConnectError) report(error.metadata);
    throw error;
  } finally {
    waited();
  }
  report(response.header);
  if (!response.stream) return response;
  let first = true;
  return passThrough(response, {
    pulling: () => (waitFrom = performance.now()),
    pulled: () => {
      waited();
      if (first) report(response.header);
      first = false;
    },
    ended: (_outcome, error) => {
      report(response.header);
      report(response.trailer);
      if (error instanceof ConnectError) report(error.metadata);
    },
  });
};
