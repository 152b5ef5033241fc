/**
 * Issue 34's attack on webhook fairness, against a real service process, with
 * its measured effect. Run with `npm run bench:webhooks` (or
 * `npx tsx bench/webhook-fairness.ts`).
 *
 * The attacker's account submits ATTACK_JOBS cheap text jobs whose
 * `callback_url` is a black hole (a TCP server on 127.0.0.1 that accepts,
 * reads and never answers). Meanwhile, every VICTIM_EVERY_S seconds from the
 * attack's start, another account submits one text job with a receiver that
 * answers 200 at once; each victim's delay is the time from its job's
 * `finished_at` to its webhook's arrival. Also sampled once a second: the
 * connections open at the black hole, and the service's RSS and descriptors.
 *
 * The service runs with its defaults (WEBHOOK_TIMEOUT 15 s included) except:
 * ALLOW_PRIVATE_URLS=true (the receivers are on loopback),
 * SIMULATED_LATENCY_MS=30 (the jobs finish quickly, as cheap text jobs do),
 * MAX_QUEUED_JOBS_PER_ACCOUNT=ATTACK_JOBS (the whole attack is queued at once).
 *
 * Knobs (environment): ATTACK_JOBS (3000), VICTIMS (6), VICTIM_EVERY_S (10),
 * VICTIM_WAIT_S (how long a victim's webhook is waited for, 300),
 * BENCH_WEBHOOK_TIMEOUT (the service's WEBHOOK_TIMEOUT, 15s),
 * BENCH_SERVICE_ROOT (the checkout whose src/main.ts runs, e.g. an older
 * commit's worktree; default this one), BENCH_OUT (also write the report there).
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer, type AddressInfo, type Socket } from "node:net";
import os from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { memory, readyGatewayUrl, runNode } from "./child-processes.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SERVICE_ROOT = process.env.BENCH_SERVICE_ROOT ?? ROOT;
const run = (args: string[], env: NodeJS.ProcessEnv) => runNode(args, env, SERVICE_ROOT);
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";
const ATTACK_JOBS = Number(process.env.ATTACK_JOBS ?? 3000);
const VICTIMS = Number(process.env.VICTIMS ?? 6);
const VICTIM_EVERY_S = Number(process.env.VICTIM_EVERY_S ?? 10);
const VICTIM_WAIT_S = Number(process.env.VICTIM_WAIT_S ?? 300);
const WEBHOOK_TIMEOUT = process.env.BENCH_WEBHOOK_TIMEOUT ?? "15s";
const MODEL = "aimodel-3.5-flash-lite";


async function api(url: string, method: string, path: string, auth: string, body?: unknown): Promise<{ status: number; json: any }> {
  const response = await fetch(url + path, {
    method, headers: { authorization: `Bearer ${auth}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : undefined };
}

async function customer(url: string, webhookUrl: string): Promise<{ key: string }> {
  const account = await api(url, "POST", "/admin/v1/accounts", ADMIN_TOKEN, { name: "bench", balance: "100.00" });
  const key = await api(url, "POST", `/admin/v1/accounts/${account.json.account_id}/keys`, ADMIN_TOKEN, { models: ["*"] });
  const hook = await api(url, "PUT", `/admin/v1/accounts/${account.json.account_id}/webhook`, ADMIN_TOKEN, { url: webhookUrl });
  if (account.status !== 201 || key.status !== 201 || hook.status !== 200) throw new Error(`setup failed: ${account.status} ${key.status} ${hook.status}`);
  return { key: key.json.api_key };
}

async function submit(url: string, key: string, callbackUrl: string, prompt: string): Promise<string> {
  for (;;) {
    const created = await api(url, "POST", "/api/v1/generations", key, { model: MODEL, prompt, callback_url: callbackUrl });
    if (created.status === 202) return created.json.job_id as string;
    if (created.status !== 429 && created.status !== 503) throw new Error(`submit: ${created.status} ${JSON.stringify(created.json)}`);
    await delay(200);
  }
}

/** A TCP server that accepts, reads and never answers. */
function blackHole() {
  const open = new Set<Socket>();
  const stats = { accepted: 0, open: 0, mostOpen: 0 };
  const server = createServer((socket) => {
    stats.accepted++;
    open.add(socket);
    stats.open = open.size;
    stats.mostOpen = Math.max(stats.mostOpen, open.size);
    socket.resume();
    socket.on("error", () => {});
    socket.on("close", () => {
      open.delete(socket);
      stats.open = open.size;
    });
  });
  return { server, stats, close: () => { for (const socket of open) socket.destroy(); server.close(); } };
}

/** A receiver answering 200 at once; records when each job's first webhook arrived. */
function receiver() {
  const arrived = new Map<string, number>();
  const server = createHttpServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const at = Date.now();
      try {
        const jobId = JSON.parse(Buffer.concat(chunks).toString("utf8")).job_id as string;
        if (!arrived.has(jobId)) arrived.set(jobId, at);
      } catch { /* not a webhook */ }
      response.writeHead(200).end("ok");
    });
  });
  return { server, arrived };
}

const listen = async (server: { listen: (port: number, host: string, cb: () => void) => unknown; address: () => unknown }) => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
};

interface VictimResult { readonly submittedAtS: number; readonly delayMs?: number }

async function victim(url: string, hookUrl: string, arrived: Map<string, number>, index: number, startedAt: number): Promise<VictimResult> {
  const { key } = await customer(url, hookUrl);
  const submittedAtS = Math.round((Date.now() - startedAt) / 1000);
  const jobId = await submit(url, key, hookUrl, `the other account's job ${index}`);
  let finishedAt: number | undefined;
  while (finishedAt === undefined) {
    const job = await api(url, "GET", `/api/v1/jobs/${jobId}`, key);
    if (job.json?.finished_at) finishedAt = Date.parse(job.json.finished_at);
    else await delay(50);
  }
  const deadline = finishedAt + VICTIM_WAIT_S * 1000;
  while (!arrived.has(jobId) && Date.now() < deadline) await delay(50);
  const at = arrived.get(jobId);
  return { submittedAtS, delayMs: at === undefined ? undefined : at - finishedAt };
}

async function commitOf(root: string): Promise<string> {
  return new Promise((resolve) => {
    const git = spawn("git", ["rev-parse", "--short", "HEAD"], { cwd: root });
    let out = "";
    git.stdout.on("data", (chunk) => (out += chunk));
    git.on("close", () => resolve(out.trim() || "unknown"));
    git.on("error", () => resolve("unknown"));
  });
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(os.tmpdir(), "bench-webhooks-"));
  const hole = blackHole();
  const good = receiver();
  const holeUrl = await listen(hole.server);
  const goodUrl = await listen(good.server);
  const service = run(["src/main.ts"], {
    PATH: process.env.PATH, HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir, LOG_LEVEL: "error", DRAIN_DELAY: "0ms",
    ALLOW_PRIVATE_URLS: "true", SIMULATED_LATENCY_MS: "30", MAX_QUEUED_JOBS_PER_ACCOUNT: String(ATTACK_JOBS), WEBHOOK_TIMEOUT,
  });
  const lines: string[] = [];
  const say = (line: string) => {
    lines.push(line);
    console.log(line);
  };
  try {
    const url = await readyGatewayUrl(service);
    const pid = service.child.pid!;
    const atRest = memory(pid);
    const attacker = await customer(url, holeUrl);
    const samples: { at: number; open: number; rssMiB: number; fds: number }[] = [];
    const startedAt = Date.now();
    const sampler = setInterval(() => samples.push({ at: Date.now() - startedAt, open: hole.stats.open, ...memory(pid) }), 1000);

    let submitted = 0;
    const attack = (async () => {
      const workers = Array.from({ length: 16 }, async () => {
        while (submitted < ATTACK_JOBS) {
          const n = submitted++;
          await submit(url, attacker.key, holeUrl, `cheap ${n}`);
        }
      });
      await Promise.all(workers);
      return Date.now() - startedAt;
    })();
    const victims = Array.from({ length: VICTIMS }, async (_, i) => {
      await delay((i + 1) * VICTIM_EVERY_S * 1000);
      return victim(url, goodUrl, good.arrived, i, startedAt);
    });
    const acceptedAfterMs = await attack;
    const results = await Promise.all(victims);
    clearInterval(sampler);
    const peak = samples.reduce((a, b) => ({ open: Math.max(a.open, b.open), rssMiB: Math.max(a.rssMiB, b.rssMiB), fds: Math.max(a.fds, b.fds) }), { open: 0, rssMiB: 0, fds: 0 });

    const commit = await commitOf(SERVICE_ROOT);
    say(`### Webhook fairness (bench/webhook-fairness.ts), service at commit ${commit}, ${os.cpus().length} cores, Node ${process.version}`);
    say("");
    say(
      `${ATTACK_JOBS} text jobs (${MODEL}) of one account with a \`callback_url\` that accepts TCP and never answers, WEBHOOK_TIMEOUT=${WEBHOOK_TIMEOUT}; ` +
        `all accepted ${(acceptedAfterMs / 1000).toFixed(1)} s after the attack began. Another account's job every ${VICTIM_EVERY_S} s:`,
    );
    say("");
    say("| other account's job submitted at | its webhook after its job finished |");
    say("|---|---|");
    for (const result of results) {
      say(`| ${result.submittedAtS} s | ${result.delayMs === undefined ? `not within ${VICTIM_WAIT_S} s` : `${(result.delayMs / 1000).toFixed(2)} s`} |`);
    }
    say("");
    say(
      `Black hole: ${hole.stats.accepted} connections accepted, at most ${hole.stats.mostOpen} open at once. ` +
        `Service: RSS ${atRest.rssMiB} MiB and ${atRest.fds} descriptors at rest, at most ${peak.rssMiB} MiB and ${peak.fds} descriptors during the run.`,
    );
    if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, `${lines.join("\n")}\n`);
  } finally {
    service.child.kill("SIGINT");
    await Promise.race([once(service.child, "exit"), delay(10_000)]);
    if (service.child.exitCode === null) service.child.kill("SIGKILL");
    hole.close();
    good.server.closeAllConnections();
    good.server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
