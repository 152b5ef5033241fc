/** Server-Timing's `upstream`: the provider's time as a call reports it to its caller, in-process or over the wire alike. */
const UPSTREAM_DURATION = /(?:^|,)\s*upstream;dur=([0-9.]+)/;

/** Reports `ms` of waiting for the provider so far: in the call's header (unary, a stream's head) and trailers (a stream's whole). */
export function reportUpstreamTime(call: { readonly responseHeader: Headers; readonly responseTrailer: Headers }, ms: number): void {
  const timing = `upstream;dur=${ms.toFixed(3)}`;
  call.responseHeader.set("server-timing", timing);
  call.responseTrailer.set("server-timing", timing);
}

/** The provider's time a call reported in `headers` (its Server-Timing), if any. */
export function upstreamTimeOf(headers: Headers): number | undefined {
  const named = UPSTREAM_DURATION.exec(headers.get("server-timing") ?? "");
  return named ? Number(named[1]) : undefined;
}
