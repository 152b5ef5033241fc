/**
 * The load generator of `npm run bench:peers` for non-streamed requests, run as a process of its own:
 * `concurrency` closed loops (load-kit's closedLoop), each POSTing the same request over a keep-alive
 * connection of its own. An answer is a success when it is 2xx and its body holds `expect` (the model's
 * text); anything else counts as an error. The CPU the measured server's processes (`cpuPids`, its process
 * tree) used is read from /proc at the measured window's edges. Prints one JSON line (RequestResult).
 *
 *   tsx bench/peers/request-client.ts '<json: RequestRun>'
 */
import { Agent, request } from "node:http";
import { closedLoop, cpu, pct, rate } from "../load-kit.js";

export interface RequestRun {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly concurrency: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly expect: string;
  readonly cpuPids: number[];
}

export interface RequestResult {
  readonly concurrency: number;
  readonly ok: number;
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly errors: number;
  readonly errorSamples: string[];
  /** CPU seconds (user + system) the server's processes used over the measured window. */
  readonly cpuSeconds: number;
}

/** A gateway that stops answering fails its requests instead of holding the loop for ever. */
const REQUEST_TIMEOUT_MS = 30_000;

function post(agent: Agent, run: RequestRun, body: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(run.url, {
      method: "POST", agent,
      headers: { ...run.headers, "content-type": "application/json", "content-length": String(body.length) },
    }, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("end", () => {
        const status = response.statusCode ?? 0;
        const text = Buffer.concat(chunks).toString("utf8");
        if (status < 200 || status > 299) resolve(`HTTP ${status}: ${text.slice(0, 200)}`);
        else resolve(text.includes(run.expect) ? "ok" : `HTTP ${status} without ${JSON.stringify(run.expect)}: ${text.slice(0, 200)}`);
      });
      response.on("error", reject);
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

export async function runRequests(run: RequestRun): Promise<RequestResult> {
  const body = Buffer.from(run.body);
  const agents = Array.from({ length: run.concurrency }, () => new Agent({ keepAlive: true, maxSockets: 1 }));
  run.cpuPids.forEach((pid) => cpu.pids.set(`pid ${pid}`, pid));
  try {
    const result = await closedLoop(`${run.concurrency} in flight`, run.concurrency, (loop) => post(agents[loop]!, run, body), run.warmupMs, run.durationMs);
    const serverCores = run.cpuPids.reduce((sum, pid) => sum + (result.cores[`pid ${pid}`] ?? 0), 0);
    return {
      concurrency: run.concurrency, ok: result.ok, rps: rate(result),
      p50: pct(result.latencies, 50), p99: pct(result.latencies, 99), max: result.latencies.at(-1) ?? NaN,
      errors: Object.entries(result.outcomes).filter(([k]) => k !== "ok").reduce((n, [, v]) => n + v, 0),
      errorSamples: result.errorSamples,
      cpuSeconds: serverCores * (run.durationMs / 1000),
    };
  } finally {
    for (const agent of agents) agent.destroy();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await runRequests(JSON.parse(process.argv[2] ?? "{}") as RequestRun);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
