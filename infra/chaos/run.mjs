// `npm run chaos`: a 3-node Cassandra ring and a 3-broker Kafka cluster on this machine, the service as 5 processes
// (2 api, 2 worker, 1 webhooks), clients and a webhook receiver, a nemesis injecting one fault at a time, then the
// history checker's report and one verdict line. Everything started is stopped however the run ends. docs/chaos.md.
//   CHAOS_DURATION  seconds of faults (default 600)     CHAOS_CLIENTS  client loops (default 4)
//   CHAOS_FAULTS    comma list of fault ids (default all: see FAULT_IDS in nemesis.mjs)
//   CHAOS_DIR       where the servers' data and logs and the history go (default /tmp/gen-chaos/<time>)
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { checkHistory, signatureValid } from "./checker.mjs";
import { admin, newHistory, runClients, webhookReceiver } from "./clients.mjs";
import { CASSANDRA_NODES, KAFKA_NODES, createKeyspace, startCassandra, startKafka, waitForCassandra, waitForKafka } from "./cluster.mjs";
import { FAULT_IDS, runNemesis } from "./nemesis.mjs";
import { INFRA_DIR, log, sleep, stopEverything, stopOnExit, takeOver } from "./processes.mjs";
import { SERVICE_PROCESSES, serviceEnv, startService } from "./service.mjs";

const DURATION = Number(process.env.CHAOS_DURATION ?? 600);
const CLIENTS = Number(process.env.CHAOS_CLIENTS ?? 4);
const ONLY = process.env.CHAOS_FAULTS ? process.env.CHAOS_FAULTS.split(",").map((s) => s.trim()) : null;
const ROOT = "/tmp/gen-chaos";
const STAMP = new Date().toISOString().replace(/[:.]/g, "-");
const RUN_DIR = process.env.CHAOS_DIR ?? join(ROOT, STAMP);
const API_URLS = SERVICE_PROCESSES.filter((p) => p.role === "api").map((p) => `http://127.0.0.1:${p.port}`);

/** Whether iptables can add and remove a rule here (installed with apt-get when missing and root). */
function partitionsUnavailable() {
  const probe = () => execFileSync("iptables", ["-S", "OUTPUT"], { stdio: ["ignore", "ignore", "pipe"] });
  try {
    probe();
    return null;
  } catch (first) {
    if (process.getuid?.() !== 0) return `iptables unusable (${first.message.split("\n")[0]}) and not root to install it`;
    try {
      log("iptables missing: apt-get install -y iptables");
      execFileSync("apt-get", ["install", "-y", "-q", "iptables"], { stdio: "ignore" });
      probe();
      return null;
    } catch (second) {
      return `iptables unusable: ${second.message.split("\n")[0]}`;
    }
  }
}

async function startCluster() {
  execFileSync("bash", [join(INFRA_DIR, "fetch.sh"), "kafka", "cassandra"], { stdio: ["ignore", "inherit", "inherit"] });
  const t0 = Date.now();
  for (const node of KAFKA_NODES) startKafka(RUN_DIR, node);
  for (const node of CASSANDRA_NODES) startCassandra(RUN_DIR, node);
  await waitForKafka();
  await waitForCassandra();
  log(`cluster ready in ${((Date.now() - t0) / 1000).toFixed(0)} s: cassandra 127.0.0.2-4:9042 (RF 3), kafka 127.0.0.5-7:9092 (RF 3, min ISR 2)`);
}

/** Two accounts with a key and the account webhook each: a rich one and a tight one whose balance runs out. */
async function accountsFor(history, hookUrl) {
  const accounts = [];
  for (const [name, balance] of [["chaos-rich", "1000"], ["chaos-tight", "1.5"]]) {
    const account = await admin(API_URLS, "POST", "/admin/v1/accounts", { name, balance });
    const key = await admin(API_URLS, "POST", `/admin/v1/accounts/${account.account_id}/keys`, { models: ["*"] });
    const hook = await admin(API_URLS, "PUT", `/admin/v1/accounts/${account.account_id}/webhook`, { url: hookUrl });
    history.credits.push({ accountId: account.account_id, amount: balance });
    accounts.push({ accountId: account.account_id, key: key.api_key, secret: hook.secret });
  }
  return accounts;
}

async function readAll(url, key, path, field) {
  const items = [];
  let token = null;
  do {
    const page = await fetch(`${url}${path}?limit=100${token ? `&page_token=${encodeURIComponent(token)}` : ""}`, {
      headers: { authorization: `Bearer ${key}` },
    }).then((r) => r.json());
    items.push(...page[field]);
    token = page.next_page_token;
  } while (token);
  return items;
}

/** Waits (bounded) until every accepted job has ended and each ended job's webhook came, then reads the stores. */
async function settle(history, accounts, receiver) {
  const ids = [...new Set(history.ops.flatMap((op) => op.jobIds))];
  const deadline = Date.now() + 300_000;
  const ended = new Set();
  while (Date.now() < deadline && ended.size < ids.length) {
    for (const op of history.ops) {
      for (const id of op.jobIds) {
        if (ended.has(id)) continue;
        const account = accounts.find((a) => a.accountId === op.accountId);
        const job = await fetch(`${API_URLS[0]}/api/v1/jobs/${id}`, { headers: { authorization: `Bearer ${account.key}` } }).then((r) => r.json()).catch(() => null);
        if (["done", "failed", "canceled"].includes(job?.status)) ended.add(id);
      }
    }
    if (ended.size < ids.length) await sleep(3000);
  }
  log(`${ended.size} of ${ids.length} accepted jobs ended`);
  const hooked = () => new Set(receiver.deliveries.map((d) => JSON.parse(d.body).job_id));
  while (Date.now() < deadline + 120_000 && [...ended].some((id) => !hooked().has(id))) await sleep(2000);
  // Holds whose end could not be written during a fault are the reaper's (TEXT_CALL_LIMIT in service.mjs): wait for it.
  const reserved = async () => {
    const balances = await Promise.all(accounts.map((a) => fetch(`${API_URLS[0]}/api/v1/balance`, { headers: { authorization: `Bearer ${a.key}` } })
      .then((r) => r.json()).catch(() => ({ reserved: "?" }))));
    return balances.some((b) => !/^0(\.0*)?$/.test(String(b.reserved)));
  };
  const reaperDeadline = Date.now() + 180_000;
  while (Date.now() < reaperDeadline && (await reserved())) await sleep(3000);
  for (const account of accounts) {
    const [jobs, entries, balance] = await Promise.all([
      readAll(API_URLS[0], account.key, "/api/v1/jobs", "jobs"),
      readAll(API_URLS[0], account.key, "/api/v1/ledger", "entries"),
      fetch(`${API_URLS[0]}/api/v1/balance`, { headers: { authorization: `Bearer ${account.key}` } }).then((r) => r.json()),
    ]);
    // A job answered to a client but missing from the listing is read by id: the listing is checked, not trusted.
    const listed = new Set(jobs.map((j) => j.job_id));
    for (const op of history.ops.filter((o) => o.accountId === account.accountId)) {
      for (const id of op.jobIds.filter((j) => !listed.has(j))) {
        const response = await fetch(`${API_URLS[0]}/api/v1/jobs/${id}`, { headers: { authorization: `Bearer ${account.key}` } });
        if (response.status === 200) jobs.push(await response.json());
        listed.add(id);
      }
    }
    history.accounts.push({ accountId: account.accountId, balance: balance.balance, reserved: balance.reserved, entries, jobs, webhooks: true });
  }
  for (const d of receiver.deliveries) {
    const payload = JSON.parse(d.body);
    const account = history.accounts.find((a) => a.jobs.some((j) => j.job_id === payload.job_id));
    const secret = accounts.find((a) => a.accountId === account?.accountId)?.secret ?? accounts[0].secret;
    history.webhooks.push({ id: d.headers["webhook-id"], jobId: payload.job_id, status: payload.status, validSignature: signatureValid(secret, d) });
  }
}

function report(history, result) {
  const lines = ["", "| window | requests | 2xx | share 2xx | 503 + Retry-After | other 4xx | no answer | 500 / bad | slowest |", "|---|---|---|---|---|---|---|---|---|"];
  for (const row of result.availability) {
    const share = row.share2xx === null ? "-" : `${(row.share2xx * 100).toFixed(1)} %`;
    lines.push(`| ${row.window} | ${row.total} | ${row.ok} | ${share} | ${row.refused503} | ${row.other4xx} | ${row.network} | ${row.bad} | ${(row.slowestMs / 1000).toFixed(1)} s |`);
  }
  const statuses = {};
  for (const r of history.requests) statuses[`${r.status}${r.code ? ` ${r.code}` : ""}`] = (statuses[`${r.status}${r.code ? ` ${r.code}` : ""}`] ?? 0) + 1;
  lines.push("", `answers: ${JSON.stringify(statuses)}`);
  const reaped = history.accounts.flatMap((a) => a.entries).filter((e) => e.type === "release" && e.reason === "abandoned");
  lines.push(`holds the reaper ended (their end was not written when the call or acceptance ended): ${reaped.length}`
    + ` (${reaped.filter((e) => e.job_id === null).length} of text calls)`);
  for (const v of result.violations.slice(0, 50)) lines.push(`VIOLATION ${v.rule}: ${v.detail}`);
  if (result.violations.length > 50) lines.push(`… and ${result.violations.length - 50} more (history.json)`);
  return lines.join("\n");
}

async function main() {
  mkdirSync(RUN_DIR, { recursive: true });
  takeOver(ROOT, join(RUN_DIR, "pids.json"));
  stopOnExit();
  log(`run directory ${RUN_DIR}; ${DURATION} s of faults, ${CLIENTS} clients`);
  const unavailable = partitionsUnavailable();
  if (unavailable) log(`partitions skipped: ${unavailable}`);
  await startCluster();
  const keyspace = `chaos_${Date.now().toString(36)}`;
  await createKeyspace(keyspace);
  const prefix = `${keyspace}.`;
  const env = serviceEnv(RUN_DIR, keyspace, prefix);
  // The two API processes start together on the fresh keyspace and migrate side by side (one takes the migration lock,
  // the other waits and finds the tables: finding 2); the others then find them.
  const apis = SERVICE_PROCESSES.filter((p) => p.role === "api");
  await Promise.all(apis.map((spec) => startService(spec, env, RUN_DIR, 900_000)));
  await Promise.all(SERVICE_PROCESSES.filter((p) => p.role !== "api").map((spec) => startService(spec, env, RUN_DIR)));
  log("service: 2 api, 2 worker, 1 webhooks processes ready");
  const receiver = await webhookReceiver();
  const history = newHistory();
  const accounts = await accountsFor(history, receiver.url);
  const started = Date.now();
  const endAt = started + DURATION * 1000;
  let stop = false;
  const clients = runClients(history, API_URLS, accounts, CLIENTS, () => stop, 180_000);
  await sleep(Math.min(15_000, DURATION * 100));
  await runNemesis({ runDir: RUN_DIR, env, prefix, only: ONLY, partitionsUnavailable: unavailable }, history, endAt);
  while (Date.now() < endAt) await sleep(500);
  stop = true;
  log("time is up: clients finish their operations");
  await clients;
  await settle(history, accounts, receiver);
  receiver.close();
  const result = checkHistory(history);
  writeFileSync(join(RUN_DIR, "history.json"), JSON.stringify(history));
  const text = report(history, result);
  writeFileSync(join(RUN_DIR, "report.md"), `${text}\n\n${result.verdict}\n`);
  process.stdout.write(`${text}\n\nfaults: ${history.faults.filter((f) => !f.name.endsWith("recovery")).map((f) => f.name).join("; ")}\n`);
  process.stdout.write(`CHAOS VERDICT ${result.verdict}\n`);
  return result.pass ? 0 : 1;
}

let code = 1;
try {
  if (ONLY && ONLY.some((id) => !FAULT_IDS.includes(id))) throw new Error(`CHAOS_FAULTS: known faults are ${FAULT_IDS.join(", ")}`);
  code = await main();
} catch (error) {
  log(`run failed: ${error.stack ?? error}`);
  process.stdout.write(`CHAOS VERDICT ERROR: the run did not complete (${error.message}); logs in ${RUN_DIR}\n`);
} finally {
  stopEverything();
  // A passing run keeps its report and history, not the servers' data; a failing one keeps everything.
  if (code === 0 && !process.env.CHAOS_KEEP) {
    for (const node of [...CASSANDRA_NODES, ...KAFKA_NODES]) rmSync(join(RUN_DIR, node.name), { recursive: true, force: true, maxRetries: 3 });
  }
}
process.exit(code);
