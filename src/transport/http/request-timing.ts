import type { FastifyRequest } from "fastify";
import type { UpstreamTime } from "../../core/text/upstream-time.js";
import type { CoreClients } from "../../runtime/core-clients.js";
import { timedWaits } from "../../shared/stream-step.js";

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

/**
 * Core calls are tied to their request by the call options every route
 * passes (requestCall: one per request), which carry the request's timing,
 * so the clients below know whose clock to add their time to without any
 * change to the routes.
 */
export const CALL_TIMING: unique symbol = Symbol("callTiming");
type TimedCall = { [CALL_TIMING]?: RequestTiming };

type AnyMethod = (input: unknown, options?: object) => unknown;

function timedMethod(method: AnyMethod): AnyMethod {
  return (input, options) => {
    const timing = (options as TimedCall | undefined)?.[CALL_TIMING];
    if (!timing) return method(input, options);
    const started = performance.now();
    const answer = method(input, options);
    if (answer instanceof Promise) {
      return answer.finally(() => {
        timing.coreMs += performance.now() - started;
      });
    }
    return timedStream(answer as AsyncIterable<unknown>, timing, started);
  };
}

/** A server stream: the time spent waiting for each next message is the core's. */
const timedStream = (stream: AsyncIterable<unknown>, timing: RequestTiming, started: number) =>
  timedWaits(stream, (ms) => (timing.coreMs += ms), started);

/** The gateway's clients of the core, timing every call made for a request (Server-Timing, http_server_core_duration_seconds). */
export function timedClients(clients: CoreClients): CoreClients {
  const wrapped = new WeakMap<object, Map<PropertyKey, AnyMethod>>();
  const serviceProxy = (client: object) =>
    new Proxy(client, {
      get(target, property) {
        const value = Reflect.get(target, property) as unknown;
        if (typeof value !== "function") return value;
        let methods = wrapped.get(target);
        if (!methods) wrapped.set(target, (methods = new Map()));
        let method = methods.get(property);
        if (!method) methods.set(property, (method = timedMethod(value.bind(target) as AnyMethod)));
        return method;
      },
    });
  const proxies = new WeakMap<object, object>();
  return new Proxy(clients, {
    get(target, property) {
      const client = Reflect.get(target, property) as object;
      let proxy = proxies.get(client);
      if (!proxy) proxies.set(client, (proxy = serviceProxy(client)));
      return proxy;
    },
  });
}
