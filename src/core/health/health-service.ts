import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthCheckResponseSchema,
  type HealthCheckResponse,
} from "../../../gen/grpc/health/v1/health_pb.js";
import type { Readiness } from "./readiness.js";

/** The health service's own name: always SERVING while the port answers. */
export const HEALTH_SERVICE_NAME = Health.typeName;

export interface HealthServiceOptions {
  /** When aborted (the server closes), open Watch calls send NOT_SERVING and end instead of holding the server open. */
  readonly shutdownSignal?: AbortSignal;
}

/**
 * `grpc.health.v1.Health` (https://github.com/grpc/grpc/blob/master/doc/health-checking.md)
 * driven by the process's Readiness: the overall name "" and every name in
 * `services` are SERVING while `readiness.current.ready`, NOT_SERVING while
 * starting, draining or a dependency is down; the Health service itself is
 * always SERVING. An unknown name fails Check with NOT_FOUND and makes Watch
 * send SERVICE_UNKNOWN (the call stays open, as the spec says).
 */
export function createHealthService(
  readiness: Readiness,
  services: readonly string[],
  options: HealthServiceOptions = {},
): ServiceImpl<typeof Health> {
  const known = new Set(["", ...services]);
  known.delete(HEALTH_SERVICE_NAME);

  /** The status of one name, or undefined when the name is not served here. */
  const statusOf = (service: string): ServingStatus | undefined => {
    if (service === HEALTH_SERVICE_NAME) return ServingStatus.SERVING;
    if (!known.has(service)) return undefined;
    return readiness.current.ready ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
  };
  const response = (status: ServingStatus) => create(HealthCheckResponseSchema, { status });

  return {
    check(request) {
      const status = statusOf(request.service);
      if (status === undefined) throw new ConnectError(`unknown service ${JSON.stringify(request.service)}`, Code.NotFound);
      return { status };
    },

    list() {
      const statuses: Record<string, HealthCheckResponse> = {};
      for (const service of [...known, HEALTH_SERVICE_NAME]) statuses[service] = response(statusOf(service)!);
      return { statuses };
    },

    async *watch(request, context: HandlerContext) {
      const shutdown = options.shutdownSignal;
      const stopped = () => context.signal.aborted || shutdown?.aborted === true;
      // One waiter at a time: readiness changes, client cancels and shutdown all wake it.
      let changed = false;
      let wake: (() => void) | undefined;
      const poke = () => {
        changed = true;
        wake?.();
      };
      const unsubscribe = readiness.onChange(poke);
      context.signal.addEventListener("abort", poke);
      shutdown?.addEventListener("abort", poke);
      try {
        let sent: ServingStatus | undefined;
        while (!stopped()) {
          changed = false;
          const status = statusOf(request.service) ?? ServingStatus.SERVICE_UNKNOWN;
          if (status !== sent) {
            sent = status;
            yield response(status);
          }
          if (!changed && !stopped()) {
            await new Promise<void>((resolve) => (wake = resolve));
            wake = undefined;
          }
        }
        // The server is closing: tell the watcher before the stream ends (it retries elsewhere or later).
        if (!context.signal.aborted && sent !== ServingStatus.NOT_SERVING && sent !== ServingStatus.SERVICE_UNKNOWN) {
          yield response(ServingStatus.NOT_SERVING);
        }
      } finally {
        unsubscribe();
        context.signal.removeEventListener("abort", poke);
        shutdown?.removeEventListener("abort", poke);
      }
    },
  };
}
