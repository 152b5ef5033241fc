/** Reading what `npm start` writes: JSON lines from the one logger (pino). */

interface Line {
  readonly msg?: string;
  readonly url?: string;
  readonly core?: string;
  readonly [field: string]: unknown;
}

/** The JSON log lines in a process's output so far (other lines, such as the first run's welcome on stderr, skipped). */
export function logLines(output: string): Line[] {
  const lines: Line[] = [];
  for (const text of output.split("\n")) {
    if (!text.startsWith("{")) continue;
    try {
      lines.push(JSON.parse(text) as Line);
    } catch {
      // a line still being written
    }
  }
  return lines;
}

/** Whether the process said it serves ("ready"). */
export const saidReady = (output: string) => logLines(output).some((line) => line.msg === "ready");

/** The gateway's origin, from its "listening" line. */
export const gatewayUrlIn = (output: string) => logLines(output).find((line) => line.msg?.startsWith("gateway (REST/SSE) listening"))?.url ?? "";

/** The core's origin (gRPC), from the "ready" line. */
export const coreUrlIn = (output: string) => logLines(output).find((line) => line.msg === "ready")?.core ?? "";

/** The metrics origin of a process without the gateway, from its "metrics listening" line. */
export const metricsUrlIn = (output: string) => logLines(output).find((line) => line.msg === "metrics listening")?.url ?? "";

/** The "ready" line, as a pattern over raw output (waitFor, counting starts). */
export const READY_LINE = /"msg":"ready"/;
export const READY_LINES = /"msg":"ready"/g;
/** The gateway's "listening" line; group 1 is its origin. */
export const GATEWAY_LISTENING = /"url":"([^"]+)","msg":"gateway \(REST\/SSE\) listening/;
