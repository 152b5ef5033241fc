/** Server-Timing on every edge: `totalMs` split into our own time (`gateway`) and the provider's (`upstream`, when it was called). */
export function serverTiming(totalMs: number, upstreamMs: number | undefined): string {
  if (upstreamMs === undefined) return `gateway;dur=${Math.max(0, totalMs).toFixed(2)}`;
  return `gateway;dur=${Math.max(0, totalMs - upstreamMs).toFixed(2)}, upstream;dur=${upstreamMs.toFixed(2)}`;
}
