/**
 * A Server-Timing value, the same on every edge (the REST gateway, the core
 * port): `totalMs` split into this service's own time (`gateway`) and, when
 * the provider was called (`upstreamMs` defined), the time spent waiting for
 * it (`upstream`), so a client can tell our cost from the provider's.
 */
export function serverTiming(totalMs: number, upstreamMs: number | undefined): string {
  if (upstreamMs === undefined) return `gateway;dur=${Math.max(0, totalMs).toFixed(2)}`;
  return `gateway;dur=${Math.max(0, totalMs - upstreamMs).toFixed(2)}, upstream;dur=${upstreamMs.toFixed(2)}`;
}
