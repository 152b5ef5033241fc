/**
 * Closed-loop load generator, run in a worker thread so that it has its own
 * event loop (and, on a 2-core box, its own core) instead of competing with the
 * server it measures. autocannon is not a dependency, so HTTP/1.1 is spoken
 * over raw keep-alive sockets: node:http's client costs about as much CPU per
 * request as a bare Fastify route, and would cap the baseline at the client's
 * speed rather than the server's.
 */
import { performance } from "node:perf_hooks";
import { parentPort } from "node:worker_threads";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { GenerationService } from "../gen/generation/v1/generation_service_pb.js";
import { RawHttpConnection } from "./raw-http-connection.js";

export interface HttpScenario {
  readonly kind: "http";
  readonly host: string;
  readonly port: number;
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
  readonly expectStatus: number;
}

export interface GrpcScenario {
  readonly kind: "grpc";
  /** gRPC, or the Connect protocol (what a gateway in front of a remote core speaks) on the same h2c port. */
  readonly protocol: "grpc" | "connect";
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly jobId: string;
}

export interface RunRequest {
  readonly scenario: HttpScenario | GrpcScenario;
  readonly connections: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  /** Hard cap on requests per phase, so a pathological case still ends. */
  readonly maxRequests: number;
}

export type WorkerMessage =
  | { readonly type: "measuring" }
  | {
      readonly type: "result";
      readonly requests: number;
      readonly errors: number;
      readonly errorSamples: string[];
      readonly statuses: Record<string, number>;
      readonly elapsedMs: number;
      readonly latenciesMs: Float64Array;
      /** Event-loop utilisation of this (client) thread while measuring: near 1 means the client, not the server, was the limit. */
      readonly clientElu: number;
    };

interface Tally {
  requests: number;
  errors: number;
  errorSamples: string[];
  statuses: Record<string, number>;
  latencies: number[];
}

function newTally(): Tally {
  return { requests: 0, errors: 0, errorSamples: [], statuses: {}, latencies: [] };
}

function noteError(tally: Tally, what: string): void {
  tally.errors++;
  if (tally.errorSamples.length < 5) tally.errorSamples.push(what);
}

function requestBytes(s: HttpScenario): Buffer {
  const body = s.body === undefined ? undefined : Buffer.from(s.body);
  const lines = [`${s.method} ${s.path} HTTP/1.1`, `host: ${s.host}:${s.port}`, "connection: keep-alive"];
  for (const [name, value] of Object.entries(s.headers)) lines.push(`${name}: ${value}`);
  if (body) lines.push(`content-length: ${body.length}`);
  const head = Buffer.from(lines.join("\r\n") + "\r\n\r\n", "latin1");
  return body ? Buffer.concat([head, body]) : head;
}

type Attempt = () => Promise<void>;

/** Runs `connections` closed loops of `attempt` until the deadline or the request cap. */
async function phase(loops: Attempt[], durationMs: number, maxRequests: number, tally: Tally): Promise<number> {
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    loops.map(async (attempt) => {
      while (performance.now() < deadline && tally.requests < maxRequests) await attempt();
    }),
  );
  return performance.now() - started;
}

async function httpLoops(s: HttpScenario, connections: number, tallyRef: { current: Tally }) {
  const bytes = requestBytes(s);
  const pool = await Promise.all(Array.from({ length: connections }, () => RawHttpConnection.open(s.host, s.port)));
  const loops = pool.map((_, index): Attempt => async () => {
    const tally = tallyRef.current;
    const t0 = performance.now();
    try {
      const { status } = await pool[index]!.request(bytes);
      tally.latencies.push(performance.now() - t0);
      tally.requests++;
      tally.statuses[status] = (tally.statuses[status] ?? 0) + 1;
      if (status !== s.expectStatus) noteError(tally, `HTTP ${status}`);
    } catch (error) {
      tally.requests++;
      noteError(tally, (error as Error).message);
      pool[index]!.close();
      pool[index] = await RawHttpConnection.open(s.host, s.port);
    }
  });
  return { loops, close: () => pool.forEach((c) => c.close()) };
}

function grpcLoops(s: GrpcScenario, connections: number, tallyRef: { current: Tally }) {
  // One HTTP/2 session multiplexes every in-flight call, as a gRPC client normally does.
  const transport =
    s.protocol === "grpc" ? createGrpcTransport({ baseUrl: s.baseUrl }) : createConnectTransport({ baseUrl: s.baseUrl, httpVersion: "2" });
  const client = createClient(GenerationService, transport);
  const headers = { authorization: `Bearer ${s.apiKey}` };
  const loops = Array.from({ length: connections }, (): Attempt => async () => {
    const tally = tallyRef.current;
    const t0 = performance.now();
    try {
      const response = await client.getJob({ jobId: s.jobId }, { headers });
      tally.latencies.push(performance.now() - t0);
      tally.requests++;
      const ok = response.job?.jobId === s.jobId;
      tally.statuses[ok ? "OK" : "OK-but-wrong-job"] = (tally.statuses[ok ? "OK" : "OK-but-wrong-job"] ?? 0) + 1;
      if (!ok) noteError(tally, "GetJob answered another job");
    } catch (error) {
      tally.requests++;
      const code = String((error as { code?: unknown }).code ?? "error");
      tally.statuses[code] = (tally.statuses[code] ?? 0) + 1;
      noteError(tally, (error as Error).message);
    }
  });
  return { loops, close: () => {} };
}

async function run(request: RunRequest): Promise<void> {
  const tallyRef = { current: newTally() };
  const { loops, close } =
    request.scenario.kind === "http"
      ? await httpLoops(request.scenario, request.connections, tallyRef)
      : grpcLoops(request.scenario, request.connections, tallyRef);
  try {
    await phase(loops, request.warmupMs, request.maxRequests, tallyRef.current);
    tallyRef.current = newTally();
    parentPort!.postMessage({ type: "measuring" } satisfies WorkerMessage);
    const eluStart = performance.eventLoopUtilization();
    const elapsedMs = await phase(loops, request.durationMs, request.maxRequests, tallyRef.current);
    const clientElu = performance.eventLoopUtilization(eluStart).utilization;
    const t = tallyRef.current;
    const latenciesMs = Float64Array.from(t.latencies);
    const result: WorkerMessage = {
      type: "result", requests: t.requests, errors: t.errors, errorSamples: t.errorSamples, statuses: t.statuses, elapsedMs, latenciesMs, clientElu,
    };
    parentPort!.postMessage(result, [latenciesMs.buffer]);
  } finally {
    close();
  }
}

parentPort?.on("message", (request: RunRequest) => {
  run(request).catch((error: unknown) => {
    throw error;
  });
});
