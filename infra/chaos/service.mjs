// The service as an operator runs it on the chaos cluster: separate processes with roles (2 api, 2 worker, 1 webhooks),
// each in a process group of its own so the nemesis can kill one and the run's end takes them all.
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { join } from "node:path";
import { buildState } from "../build-state.mjs";
import { CASSANDRA_CONTACT_POINTS, KAFKA_BROKERS } from "./cluster.mjs";
import { REPO_DIR, forgetGroup, registerGroup, sleep } from "./processes.mjs";

export const SERVICE_PROCESSES = [
  { name: "api-1", role: "api", port: 18181 },
  { name: "api-2", role: "api", port: 18182 },
  { name: "worker-1", role: "worker" },
  { name: "worker-2", role: "worker" },
  { name: "webhooks-1", role: "webhooks" },
];
export const ADMIN_TOKEN = "chaos-admin-token-0123456789abcdef";

/**
 * The settings every process shares. Replication and the consistency levels the code asks for are what a 3-replica
 * deployment needs; the short lease and requeue times let the run's end see every job finish within a few minutes.
 */
export function serviceEnv(runDir, keyspace, prefix) {
  return {
    PATH: process.env.PATH ?? "",
    HOST: "127.0.0.1",
    GRPC_PORT: "0",
    METRICS_PORT: "0",
    ADMIN_TOKEN,
    LOG_LEVEL: "warn",
    DATA_DIR: join(runDir, "service-data"),
    URL_SIGNING_SECRET: "chaos-url-signing-secret-0123456789",
    ALLOW_PRIVATE_URLS: "true",
    CASSANDRA_CONTACT_POINTS,
    CASSANDRA_KEYSPACE: keyspace,
    CASSANDRA_LOCAL_DC: "datacenter1",
    CASSANDRA_REPLICATION: "{'class': 'SimpleStrategy', 'replication_factor': 3}",
    KAFKA_BROKERS,
    KAFKA_TOPIC_PREFIX: prefix,
    KAFKA_PARTITIONS: "3",
    SIMULATED_LATENCY_MS: "300",
    JOB_LEASE: "10s",
    REAPER_INTERVAL: "2s",
    REQUEUE_AFTER: "20s",
    ACCEPT_TIMEOUT: "15s",
    WEBHOOK_RETRY_SCHEDULE: "1s,2s,5s,10s,20s,30s,60s",
    WEBHOOK_BREAKER_OPEN: "2s",
    WEBHOOK_BREAKER_MAX_OPEN: "10s",
    SHUTDOWN_GRACE: "2s",
    // A text call's hold whose end could not be written (the store failed under a fault) is the reaper's after this.
    TEXT_CALL_LIMIT: "60s",
    DRAIN_DELAY: "0ms",
  };
}

const entry = () => (buildState(REPO_DIR) === "current" ? ["dist/src/main.js"] : ["--import", "tsx", "src/main.ts"]);

/** Starts one service process (its JSON log in the run directory); resolves once it says "ready". */
export async function startService(spec, env, runDir, timeoutMs = 300_000) {
  const logFile = createWriteStream(join(runDir, `${spec.name}.log`), { flags: "a" });
  const child = spawn("nice", ["-n", "5", process.execPath, ...entry()], {
    cwd: REPO_DIR, detached: true, stdio: ["ignore", "pipe", "pipe"],
    env: { ...env, ROLE: spec.role, PORT: String(spec.port ?? 0), WORKER_ID: `${spec.name}-${Date.now().toString(36)}` },
  });
  registerGroup(spec.name, child.pid);
  let ready = false;
  let output = "";
  const onData = (chunk) => {
    logFile.write(chunk);
    if (!ready) {
      output += chunk;
      ready = output.split("\n").some((line) => line.startsWith("{") && line.includes('"msg":"ready"'));
      if (ready) output = "";
    }
  };
  child.stdout.on("data", onData);
  child.stderr.on("data", onData);
  let exited = false;
  child.once("exit", () => {
    exited = true;
    forgetGroup(spec.name, child.pid);
  });
  const deadline = Date.now() + timeoutMs;
  while (!ready) {
    if (exited) throw new Error(`${spec.name} exited before it was ready (see ${spec.name}.log)`);
    if (Date.now() > deadline) throw new Error(`${spec.name} not ready in ${timeoutMs} ms`);
    await sleep(250);
  }
  return child;
}
