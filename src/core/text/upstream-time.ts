/** Server-Timing's `upstream`: the provider's time as a call reports it to its caller, in-process or over the wire alike. */
const UPSTREAM_DURATION = /(?:^|,)\s*upstream;dur=([0-9.]+)/;

/** Reports `ms` of waiting for the provider in `headers` (a call's response header so far, or a stream's trailer). */
export function reportUpstreamTime(headers: Headers, ms: number): void {
  headers.set("server-timing", `upstream;dur=${ms.toFixed(3)}`);
}

/** The provider's time a call reported in `headers` (its Server-Timing), if any. */
export function upstreamTimeOf(headers: Headers): number | undefined {
  const named = UPSTREAM_DURATION.exec(headers.get("server-timing") ?? "");
  return named ? Number(named[1]) : undefined;
}
