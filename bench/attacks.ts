/**
 * The two cheap denial-of-service attacks of issue 8 and the pipelining one
 * of issue 34, against a real service process, with their measured effect.
 * Run with `npm run bench:attacks` (or `npx tsx bench/attacks.ts`); about
 * two minutes (`ATTACKS=pipelining`: 40 s).
 *
 * Three processes: the service (`src/main.ts`, embedded backend), an attacker
 * (this file with `attacker`), and this one, which drives both, probes
 * `/readyz` as a load balancer would (a new connection per probe, from
 * 127.0.0.1) and reads the service's memory from /proc (Linux).
 *
 * (b) large bodies: three unauthenticated 150 MB POSTs at once (jobs API,
 *     vendor generateContent with a wrong `?key=`, vendor interactions),
 *     each client trying to send its whole body; RSS before, after, peak.
 * (a) slow connections: ATTACK_CONNECTIONS connections from
 *     ATTACK_ADDRESSES loopback addresses (127.0.0.2, …), each sending
 *     headers announcing a body (with one ordinary API key), then one byte
 *     every TRICKLE_MS; /readyz p50/p99 before and during, the service's RSS
 *     and open descriptors, and how the attack ends (refused beyond the
 *     per-client cap, cut by HTTP_REQUEST_TIMEOUT).
 *
 * (c) pipelining (issue 34): PIPE_CONNECTIONS connections from 127.0.0.2,
 *     each writing PIPE_REQUESTS pipelined `GET PIPE_PATH` at once and
 *     never reading, held PIPE_HOLD_S; RSS before, sampled peak and after
 *     the connections close, /readyz p50/p99/max throughout, and the
 *     in-flight gauge once they are closed.
 *
 * Knobs (environment): ATTACKS (which to run, `bodies,slow,pipelining`),
 * ATTACK_CONNECTIONS (4000), ATTACK_ADDRESSES (16),
 * TRICKLE_MS (500), BENCH_REQUEST_TIMEOUT (HTTP_REQUEST_TIMEOUT of the
 * service, 15s), PROBE_SECONDS (8), CUT_WAIT_S (how long to wait for the slow
 * connections to be cut, 60), PIPE_CONNECTIONS (8), PIPE_REQUESTS (1000),
 * PIPE_HOLD_S (20), PIPE_PATH (/openapi.json), BENCH_OUT (also write the report there).
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { connect, type Socket } from "node:net";
import os from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { memory, readyGatewayUrl, runNode, waitFor, type Running } from "./child-processes.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const run = (args: string[], env: NodeJS.ProcessEnv) => runNode(args, env, ROOT);
const THIS_FILE = fileURLToPath(import.meta.url);
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";
const MB150 = 150 * 1024 * 1024;

const CONNECTIONS = Number(process.env.ATTACK_CONNECTIONS ?? 4000);
const ADDRESSES = Number(process.env.ATTACK_ADDRESSES ?? 16);
const TRICKLE_MS = Number(process.env.TRICKLE_MS ?? 500);
const REQUEST_TIMEOUT = process.env.BENCH_REQUEST_TIMEOUT ?? "15s";
const PROBE_SECONDS = Number(process.env.PROBE_SECONDS ?? 8);
const CUT_WAIT_S = Number(process.env.CUT_WAIT_S ?? 60);
const ATTACKS = new Set((process.env.ATTACKS ?? "bodies,slow,pipelining").split(","));
const PIPE_CONNECTIONS = Number(process.env.PIPE_CONNECTIONS ?? 8);
const PIPE_REQUESTS = Number(process.env.PIPE_REQUESTS ?? 1000);
const PIPE_HOLD_S = Number(process.env.PIPE_HOLD_S ?? 20);
const PIPE_PATH = process.env.PIPE_PATH ?? "/openapi.json";

// ---------------------------------------------------------------- attacker process

interface SlowOrder { readonly mode: "slow"; readonly url: string; readonly key: string; readonly connections: number; readonly addresses: number; readonly trickleMs: number }
interface BodiesOrder { readonly mode: "bodies"; readonly url: string }
interface PipelineOrder { readonly mode: "pipelining"; readonly url: string; readonly path: string; readonly connections: number; readonly requests: number }
type Order = SlowOrder | BodiesOrder | PipelineOrder;

interface SlowStats { opened: number; connectErrors: number; open: number; refused: number; timedOut: number; otherAnswers: number; closedSilently: number; done: boolean }

const report = (message: unknown) => process.stdout.write(`${JSON.stringify(message)}\n`);

async function openSocket(url: string, localAddress?: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port), ...(localAddress ? { localAddress } : {}) });
  socket.on("error", () => {});
  await Promise.race([once(socket, "connect"), once(socket, "close").then(() => { throw new Error("closed before connecting"); })]);
  return socket;
}

async function slowAttack(order: SlowOrder): Promise<void> {
  const stats: SlowStats = { opened: 0, connectErrors: 0, open: 0, refused: 0, timedOut: 0, otherAnswers: 0, closedSilently: 0, done: false };
  const head =
    `POST /api/v1/generations HTTP/1.1\r\nHost: service\r\nAuthorization: Bearer ${order.key}\r\n` +
    "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{";
  const live = new Set<Socket>();
  const watch = (socket: Socket) => {
    let first = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => { if (first.length < 12) first += chunk; });
    socket.on("close", () => {
      live.delete(socket);
      stats.open--;
      const status = first.slice(9, 12);
      if (status === "429") stats.refused++;
      else if (status === "408") stats.timedOut++;
      else if (status) stats.otherAnswers++;
      else stats.closedSilently++;
    });
  };
  const timer = setInterval(() => {
    for (const socket of live) socket.write(" ");
    report({ stats });
  }, order.trickleMs);
  for (let i = 0; i < order.connections; i += 200) {
    await Promise.all(Array.from({ length: Math.min(200, order.connections - i) }, async (_, j) => {
      try {
        const socket = await openSocket(order.url, `127.0.0.${2 + ((i + j) % order.addresses)}`);
        stats.opened++;
        stats.open++;
        live.add(socket);
        watch(socket);
        socket.write(head);
      } catch {
        stats.connectErrors++;
      }
    }));
  }
  stats.done = true;
  report({ stats });
  // Trickles until the driver kills it.
  await new Promise<never>(() => timer.ref());
}

async function bodiesAttack(order: BodiesOrder): Promise<void> {
  const targets = [
    "/api/v1/generations",
    "/api/aimodel/v1beta/models/aimodel-3.5-flash:generateContent?key=wrong-key",
    "/api/aimodel/v1beta/interactions",
  ];
  const piece = Buffer.alloc(1024 * 1024, 0x20);
  const results = await Promise.all(targets.map(async (path) => {
    const socket = await openSocket(order.url);
    let answer = "";
    let closed = false;
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (answer += chunk));
    socket.on("close", () => (closed = true));
    socket.write(`POST ${path} HTTP/1.1\r\nHost: service\r\nContent-Type: application/json\r\nContent-Length: ${MB150}\r\n\r\n`);
    let sent = 0;
    const started = performance.now();
    while (sent < MB150 && !closed && !socket.destroyed) {
      sent += piece.length;
      if (!socket.write(piece)) await Promise.race([once(socket, "drain"), once(socket, "close")]).catch(() => undefined);
    }
    if (!closed) await Promise.race([once(socket, "close"), delay(5000)]);
    socket.destroy();
    return { path: path.split("?")[0], status: answer.slice(9, 12) || "none", sentMiB: Math.round(sent / 1024 / 1024), ms: Math.round(performance.now() - started) };
  }));
  report({ bodies: results });
}

/** Each connection writes its requests at once and never reads: the answers can only pile up in the service. */
async function pipeliningAttack(order: PipelineOrder): Promise<void> {
  const requests = `GET ${order.path} HTTP/1.1\r\nHost: service\r\n\r\n`.repeat(order.requests);
  const sockets = await Promise.all(Array.from({ length: order.connections }, () => openSocket(order.url, "127.0.0.2")));
  let closed = 0;
  for (const socket of sockets) {
    socket.pause();
    socket.on("close", () => closed++);
    socket.write(requests);
  }
  report({ pipelined: { connections: sockets.length, bytesEach: requests.length } });
  // Held until the driver kills this process (which closes the connections).
  setInterval(() => report({ pipelineClosed: closed }), 1000);
  await new Promise<never>(() => {});
}

// ---------------------------------------------------------------- driver


function getStatus(url: string, timeoutMs: number): Promise<number> {
  return new Promise((resolve) => {
    const request = http.get(url, { agent: false, timeout: timeoutMs }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode ?? 0));
    });
    request.on("timeout", () => request.destroy());
    request.on("error", () => resolve(0));
  });
}

/** /readyz from 127.0.0.1, a new connection every probe, one probe every 25 ms. */
async function probeReadyz(url: string, seconds: number) {
  const latencies: number[] = [];
  let failures = 0;
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const started = performance.now();
    const status = await getStatus(`${url}/readyz`, 5000);
    if (status === 200) latencies.push(performance.now() - started);
    else failures++;
    await delay(25);
  }
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { probes: latencies.length + failures, failures, p50: at(0.5), p99: at(0.99), max: latencies.at(-1) ?? NaN };
}

async function admin(url: string, path: string, body: unknown) {
  const response = await fetch(url + path, {
    method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body: JSON.stringify(body),
  });
  if (response.status !== 201) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return (await response.json()) as Record<string, string>;
}

const ms = (value: number) => (Number.isFinite(value) ? `${value.toFixed(1)} ms` : "–");

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(os.tmpdir(), "bench-attacks-"));
  const service = run(["src/main.ts"], {
    PATH: process.env.PATH, HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir,
    LOG_LEVEL: "warn", DRAIN_DELAY: "0ms", HTTP_REQUEST_TIMEOUT: REQUEST_TIMEOUT,
  });
  const attackers: Running[] = [];
  const lines: string[] = [];
  const say = (line: string) => {
    lines.push(line);
    console.log(line);
  };
  try {
    const url = await readyGatewayUrl(service);
    const pid = service.child.pid!;
    const account = await admin(url, "/admin/v1/accounts", { name: "bench", balance: "10.00" });
    const key = await admin(url, `/admin/v1/accounts/${account.account_id}/keys`, { models: ["*"] });
    let commit = "unknown";
    try {
      commit = (await new Promise<string>((resolve) => {
        const git = spawn("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT });
        let out = "";
        git.stdout.on("data", (chunk) => (out += chunk));
        git.on("close", () => resolve(out.trim() || "unknown"));
      }));
    } catch { /* not a git checkout */ }
    say(`## Attacks (bench/attacks.ts), commit ${commit}, ${os.cpus().length} cores, Node ${process.version}`);
    say("");

    // (b) large unauthenticated bodies
    if (ATTACKS.has("bodies")) {
      await delay(1000);
      const idle = memory(pid);
      const bodies = run([THIS_FILE, "attacker", JSON.stringify({ mode: "bodies", url } satisfies BodiesOrder)], { PATH: process.env.PATH });
      attackers.push(bodies);
      const outcome = await waitFor(() => /^\{"bodies".*$/m.exec(bodies.output)?.[0], 120_000, "the body attack");
      const afterBodies = memory(pid);
      await delay(2000);
      const settled = memory(pid);
      say("### Three unauthenticated 150 MB POSTs at once");
      say("");
      say("| target | answer | body the client got to send | time |");
      say("|---|---|---|---|");
      for (const result of (JSON.parse(outcome) as { bodies: { path: string; status: string; sentMiB: number; ms: number }[] }).bodies) {
        say(`| \`POST ${result.path}\` | ${result.status} | ${result.sentMiB} MiB of 150 | ${result.ms} ms |`);
    }
    say("");
    say(
      `Service RSS: ${idle.rssMiB} MiB before, ${afterBodies.rssMiB} MiB right after, ${settled.rssMiB} MiB 2 s later; ` +
        `peak (VmHWM) ${idle.peakMiB} MiB before, ${afterBodies.peakMiB} MiB after.`,
    );
    say("");
    }

    // (a) slow connections
    if (ATTACKS.has("slow")) {
      const before = await probeReadyz(url, PROBE_SECONDS);
      const atRest = memory(pid);
      const order: SlowOrder = { mode: "slow", url, key: key.api_key!, connections: CONNECTIONS, addresses: ADDRESSES, trickleMs: TRICKLE_MS };
      const slow = run([THIS_FILE, "attacker", JSON.stringify(order)], { PATH: process.env.PATH });
      attackers.push(slow);
      const lastStats = (): SlowStats | undefined => {
        const all = [...slow.output.matchAll(/^\{"stats":(.*)\}$/gm)];
        return all.length ? (JSON.parse(all.at(-1)![1]!) as SlowStats) : undefined;
      };
      const attackStarted = Date.now();
      await waitFor(() => (lastStats()?.done ? true : undefined), 120_000, "the slow connections to be opened");
      const openedAfter = Date.now() - attackStarted;
      const during = await probeReadyz(url, PROBE_SECONDS);
      const underAttack = memory(pid);
      const held = lastStats()!;
      const cutAfter = await waitFor(() => (lastStats()?.open === 0 ? Date.now() - attackStarted : undefined), CUT_WAIT_S * 1000, "the cut")
        .catch(() => undefined);
      const end = lastStats()!;
      say(`### ${CONNECTIONS} slow connections from ${ADDRESSES} addresses (headers announcing 1 MB, then 1 byte every ${TRICKLE_MS} ms; HTTP_REQUEST_TIMEOUT=${REQUEST_TIMEOUT})`);
      say("");
      say("| /readyz from 127.0.0.1 (new connection per probe) | probes | failed | p50 | p99 | max |");
      say("|---|---|---|---|---|---|");
      say(`| before the attack | ${before.probes} | ${before.failures} | ${ms(before.p50)} | ${ms(before.p99)} | ${ms(before.max)} |`);
      say(`| during the attack | ${during.probes} | ${during.failures} | ${ms(during.p50)} | ${ms(during.p99)} | ${ms(during.max)} |`);
      say("");
      say(`Opened in ${openedAfter} ms: ${held.opened} connected (${held.connectErrors} connect errors), ${held.open} held open during the probes, ${held.refused} refused (429) by then.`);
      say(`Service RSS ${atRest.rssMiB} MiB and ${atRest.fds} descriptors before, ${underAttack.rssMiB} MiB and ${underAttack.fds} descriptors during.`);
      say(
        (cutAfter === undefined ? `${end.open} still open ${CUT_WAIT_S} s after the attack began; ` : `All closed ${cutAfter} ms after the attack began: `) +
          `${end.timedOut} cut with 408 by the request timeout, ${end.refused} refused with 429, ${end.otherAnswers} other answers, ${end.closedSilently} closed without an answer.`,
      );
      say("");
    }

    // (c) pipelined requests never read
    if (ATTACKS.has("pipelining")) {
      await delay(1000);
      const atRest = memory(pid);
      const pipe = run([THIS_FILE, "attacker", JSON.stringify({ mode: "pipelining", url, path: PIPE_PATH, connections: PIPE_CONNECTIONS, requests: PIPE_REQUESTS } satisfies PipelineOrder)], { PATH: process.env.PATH });
      attackers.push(pipe);
      await waitFor(() => (/^\{"pipelined"/m.test(pipe.output) ? true : undefined), 30_000, "the pipelined requests to be sent");
      let peak = atRest.rssMiB;
      const sampler = setInterval(() => (peak = Math.max(peak, memory(pid).rssMiB)), 100);
      const during = await probeReadyz(url, PIPE_HOLD_S);
      const held = memory(pid);
      clearInterval(sampler);
      peak = Math.max(peak, held.rssMiB);
      pipe.child.kill("SIGKILL");
      await once(pipe.child, "exit");
      await delay(2000);
      const afterClose = memory(pid);
      const exposition = await (await fetch(`${url}/metrics`)).text();
      // Less the scrape itself.
      const inFlight = Number(/^http_server_requests_in_flight (\S+)$/m.exec(exposition)?.[1] ?? NaN) - 1;
      say(`### ${PIPE_CONNECTIONS} connections × ${PIPE_REQUESTS} pipelined \`GET ${PIPE_PATH}\`, never read, held ${PIPE_HOLD_S} s`);
      say("");
      say("| /readyz from 127.0.0.1 (new connection per probe) during the attack | probes | failed | p50 | p99 | max |");
      say("|---|---|---|---|---|---|");
      say(`| ${PIPE_CONNECTIONS} × ${PIPE_REQUESTS} pipelined, never read | ${during.probes} | ${during.failures} | ${ms(during.p50)} | ${ms(during.p99)} | ${ms(during.max)} |`);
      say("");
      say(
        `Service RSS ${atRest.rssMiB} MiB before, peak ${peak} MiB while held (sampled every 100 ms), ${held.rssMiB} MiB at the end of the hold, ` +
          `${afterClose.rssMiB} MiB 2 s after the connections closed; http_server_requests_in_flight then ${inFlight}.`,
      );
      say("");
    }
    if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, `${lines.join("\n")}\n`);
  } finally {
    for (const attacker of attackers) attacker.child.kill("SIGKILL");
    service.child.kill("SIGINT");
    await Promise.race([once(service.child, "exit"), delay(10_000)]);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "attacker") {
  const order = JSON.parse(process.argv[3]!) as Order;
  await (order.mode === "slow" ? slowAttack(order) : order.mode === "bodies" ? bodiesAttack(order) : pipeliningAttack(order));
  process.exit(0);
} else {
  await main();
}
