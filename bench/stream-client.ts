/**
 * The stream load generator of `bench/overhead.ts`, run as a process of its
 * own: `concurrency` closed loops, each POSTing the same SSE request over a
 * keep-alive connection of its own and timing, per stream, the first event
 * (the first `data:` line) and the whole stream (the response's end), from the
 * moment the request is written. Prints one JSON line: the request count,
 * failures, and the sorted timings' percentiles.
 *
 *   tsx bench/stream-client.ts '<json: {url, headers, body, concurrency, durationMs, warmupMs}>'
 */
import { Agent, request } from "node:http";
import { performance } from "node:perf_hooks";

export interface StreamRun {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly concurrency: number;
  readonly durationMs: number;
  readonly warmupMs: number;
  /** When set, a stream whose bytes do not hold it (its last token, say) counts as failed: a 200 that ended early is no success. */
  readonly expect?: string;
}

export interface StreamResult {
  readonly streams: number;
  readonly failures: number;
  readonly failureSamples: string[];
  readonly elapsedMs: number;
  readonly firstEvent: Percentiles;
  readonly whole: Percentiles;
  /** The gateway's own time before its first event (Server-Timing), where the server reports one. */
  readonly own?: Percentiles;
}

export interface Percentiles { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number }

export function percentiles(values: number[]): Percentiles {
  const sorted = Float64Array.from(values).sort();
  const at = (p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!);
  return { p50: at(50), p90: at(90), p99: at(99), max: sorted.length ? sorted[sorted.length - 1]! : NaN };
}

/** The gateway's own time before the first event, as its Server-Timing says (`gateway;dur=`), when it sends one. */
const gatewayMs = (header: string | string[] | undefined) => Number(/gateway;dur=([0-9.]+)/.exec(String(header ?? ""))?.[1] ?? NaN);

function oneStream(agent: Agent, run: StreamRun, body: Buffer): Promise<{ first: number; whole: number; own: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let first = NaN;
    let seen = "";
    const req = request(run.url, {
      method: "POST", agent,
      headers: { ...run.headers, "content-type": "application/json", "content-length": String(body.length) },
    }, (response) => {
      if (response.statusCode !== 200) {
        response.resume();
        reject(new Error(`HTTP ${response.statusCode}`));
        return;
      }
      response.on("data", (chunk: Buffer) => {
        if (Number.isNaN(first) && chunk.includes("data:")) first = performance.now() - t0;
        if (run.expect !== undefined) seen += chunk.toString("latin1");
      });
      const own = gatewayMs(response.headers["server-timing"]);
      response.on("end", () => {
        const whole = performance.now() - t0;
        if (Number.isNaN(first)) reject(new Error("stream ended without an event"));
        else if (run.expect !== undefined && !seen.includes(run.expect)) reject(new Error(`stream ended without ${JSON.stringify(run.expect)}`));
        else resolve({ first, whole, own });
      });
      response.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

export async function runStreams(run: StreamRun): Promise<StreamResult> {
  const body = Buffer.from(run.body);
  const firsts: number[] = [];
  const wholes: number[] = [];
  const owns: number[] = [];
  const failureSamples: string[] = [];
  let failures = 0;
  const start = performance.now();
  const warmEnd = start + run.warmupMs;
  const end = warmEnd + run.durationMs;
  await Promise.all(Array.from({ length: run.concurrency }, async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      while (performance.now() < end) {
        try {
          const { first, whole, own } = await oneStream(agent, run, body);
          if (performance.now() >= warmEnd) {
            firsts.push(first);
            wholes.push(whole);
            if (!Number.isNaN(own)) owns.push(own);
          }
        } catch (error) {
          if (performance.now() >= warmEnd) failures++;
          if (failureSamples.length < 5) failureSamples.push((error as Error).message);
        }
      }
    } finally {
      agent.destroy();
    }
  }));
  return {
    streams: firsts.length, failures, failureSamples, elapsedMs: performance.now() - warmEnd,
    firstEvent: percentiles(firsts), whole: percentiles(wholes), ...(owns.length > 0 ? { own: percentiles(owns) } : {}),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const run = JSON.parse(process.argv[2] ?? "{}") as StreamRun;
  const result = await runStreams(run);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
