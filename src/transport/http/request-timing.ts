import { createContextKey, type Interceptor } from "@connectrpc/connect";
import type { FastifyRequest } from "fastify";
import type { UpstreamTime } from "../../core/index.js";
import { passThrough } from "../../shared/stream-step.js";

/**
 * Where a request's time went: since its arrival, waiting for the core, and
 * (a text call's) waiting for the provider, which the core reports through
 * the call's UPSTREAM_TIME (set only when the provider was called).
 */
export interface RequestTiming extends UpstreamTime {
  readonly startedAt: number;
  coreMs: number;
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

/** `upstream;dur=<ms>` in a Server-Timing value. */
const UPSTREAM_DURATION = /(?:^|,)\s*upstream;dur=([0-9.]+)/;

/** Adds the provider's time a remote core's Server-Timing names (if any) to `timing`. */
function addUpstreamTime(timing: RequestTiming, headers: Headers): void {
  const named = UPSTREAM_DURATION.exec(headers.get("server-timing") ?? "");
  if (named) timing.upstreamMs = (timing.upstreamMs ?? 0) + Number(named[1]);
}

/**
 * A gateway request's core calls count toward its core time (Server-Timing,
 * http_server_core_duration_seconds): a unary call's whole time, a stream's
 * waits for each next message. A remote core reports the provider's time in
 * its answer's Server-Timing (a stream's in its trailers), added to the
 * request's as the in-process core adds it through UPSTREAM_TIME.
 */
export const coreTime: Interceptor = (next) => async (request) => {
  const timing = request.contextValues.get(REQUEST_TIMING);
  if (!timing) return next(request);
  const started = performance.now();
  let waitFrom = started;
  const waited = () => {
    const now = performance.now();
    timing.coreMs += now - waitFrom;
    waitFrom = now;
  };
  let response;
  try {
    response = await next(request);
  } finally {
    waited();
  }
  addUpstreamTime(timing, response.header);
  if (!response.stream) return response;
  return passThrough(response, {
    pulling: () => (waitFrom = performance.now()),
    pulled: waited,
    ended: (outcome) => {
      if (outcome === "done") addUpstreamTime(timing, response.trailer);
    },
  });
};
