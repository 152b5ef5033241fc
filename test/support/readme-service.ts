import assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createConnection, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildState } from "../../infra/build-state.mjs";
import { eventually } from "./eventually.js";
import { call, type ApiResponse, type RequestOptions } from "./harness.js";
import { commandsOf } from "./readme-walkthrough.js";
import { readerEnvironment, readmeBlock, readReadme, ROOT, runBlockOk } from "./readme-blocks.js";

/**
 * The service as the README starts it: its `start-service` block
 * (`ADMIN_TOKEN=change-me-to-a-long-random-secret npm start`), run exactly as written, in bash, from
 * the repository root, in the background as its own process group, on the
 * ports the README names (8080 for REST, 8081 for gRPC). The only additions
 * are variables the command does not mention: DATA_DIR (a temporary
 * directory, so the repository's ./data is never touched), LOG_LEVEL and
 * DRAIN_DELAY (so that stopping takes no five-second drain).
 *
 * Fixed ports mean one such service at a time on a machine: test files that
 * start it (the walk-through, the Java client) take turns through a lock, and
 * a port held by anything else fails at once, naming the port.
 */

export const README_GATEWAY_PORT = 8080;
export const README_CORE_PORT = 8081;
/** What the README's commands address the core as (grpcurl, buf curl, the Java client). */
export const README_CORE_ADDRESS = `127.0.0.1:${README_CORE_PORT}`;

const READY_TIMEOUT_MS = 90_000;
const LOCK_TIMEOUT_MS = 300_000;
const STOP_TIMEOUT_MS = 20_000;
const KILL_TIMEOUT_MS = 5_000;

export interface ReadmeService {
  /** The gateway, as the README's `reader-env` block exports it (BASE_URL). */
  readonly url: string;
  /** The admin token, as the README's `reader-env` block exports it (ADMIN_TOKEN). */
  readonly adminToken: string;
  /** The command line that started it, exactly as the README has it. */
  readonly command: string;
  /** Everything the service printed so far (for failure messages). */
  output(): string;
  /** SIGTERM to its process group, SIGKILL after a deadline; resolves once no process of the group is left. */
  stop(): Promise<void>;
}

/** The values the README's `reader-env` block exports, read by running it as written. */
export async function readerEnvValues(): Promise<{ BASE_URL: string; ADMIN_TOKEN: string }> {
  const block = readmeBlock("reader-env");
  const printed = await runBlockOk("reader-env", { ...block, body: `${block.body}\nprintf '%s\\n%s\\n' "$BASE_URL" "$ADMIN_TOKEN"` }, {
    cwd: ROOT,
    env: readerEnvironment(),
    timeoutMs: 10_000,
  });
  const [BASE_URL = "", ADMIN_TOKEN = ""] = printed.trimEnd().split("\n").slice(-2);
  return { BASE_URL, ADMIN_TOKEN };
}

export async function startReadmeService(): Promise<ReadmeService> {
  const markdown = readReadme();
  const start = readmeBlock("start-service", markdown);
  const commands = commandsOf(start.body);
  assert.equal(commands.length, 1, `the start-service block (README.md line ${start.line}) is one command line: ${JSON.stringify(commands)}`);
  assert.match(commands[0]!, /\bnpm start\b/, "the start-service block starts the service with npm start");
  const reader = await readerEnvValues();
  assert.equal(reader.BASE_URL, `http://127.0.0.1:${README_GATEWAY_PORT}`, "the README's BASE_URL is the gateway that npm start opens by default");

  const releaseLock = await takeTurn();
  let group: ProcessGroup | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), "readme-service-data-"));
  const cleanUp = async () => {
    await group?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    releaseLock();
  };
  try {
    for (const port of [README_GATEWAY_PORT, README_CORE_PORT]) await assertPortFree(port);
    // A reader's `npm ci` built dist/; sources edited since (a working tree under development) are built again
    // first, as `npm start` asks, under the same turn as the start.
    if (buildState(ROOT) !== "current") execFileSync("npm", ["run", "--silent", "build"], { cwd: ROOT, stdio: "ignore" });
    group = ProcessGroup.spawn(start.body, {
      cwd: ROOT,
      env: readerEnvironment({ DATA_DIR: dataDir, LOG_LEVEL: "warn", DRAIN_DELAY: "0ms", npm_config_update_notifier: "false" }),
    });
    await waitUntilReady(group, reader.BASE_URL);
  } catch (error) {
    const output = group?.output() ?? "";
    await cleanUp();
    if (output) (error as Error).message += `\n--- the service's output ---\n${output}`;
    throw error;
  }
  const running = group;
  let stopped: Promise<void> | undefined;
  return {
    url: reader.BASE_URL,
    adminToken: reader.ADMIN_TOKEN,
    command: start.body,
    output: () => running.output(),
    stop: () => (stopped ??= cleanUp()),
  };
}

/** A call to the README's service with its admin token. */
export function adminCall(service: ReadmeService, method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse> {
  return call(service, method, path, { ...options, headers: { ...options.headers, authorization: `Bearer ${service.adminToken}` } });
}

/** An account with `balance` and a key granted `models`, made through the README service's admin API. */
export async function createReadmeCustomer(service: ReadmeService, balance: string, models: string[] = ["*"]): Promise<{ accountId: string; apiKey: string }> {
  const account = await adminCall(service, "POST", "/admin/v1/accounts", { body: { name: "readme-test", balance } });
  assert.equal(account.status, 201, account.text);
  const key = await adminCall(service, "POST", `/admin/v1/accounts/${account.json.account_id}/keys`, { body: { models } });
  assert.equal(key.status, 201, key.text);
  return { accountId: account.json.account_id, apiKey: key.json.api_key };
}

async function waitUntilReady(group: ProcessGroup, baseUrl: string): Promise<void> {
  await eventually(
    async () => {
      if (group.exited) throw new Error(`\`${group.command.trim()}\` exited (${group.exited}) before /readyz answered 200`);
      const readyz = await fetch(`${baseUrl}/readyz`).then(
        async (response) => `${response.status} ${await response.text()}`,
        (error: Error) => error.message,
      );
      return { readyz, coreAccepts: readyz.startsWith("200 ") && (await accepts(README_CORE_PORT)) };
    },
    (seen) => seen.coreAccepts,
    { timeoutMs: READY_TIMEOUT_MS, intervalMs: 100, what: `the README's service to be ready (GET ${baseUrl}/readyz, then the core's port)` },
  );
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

async function assertPortFree(port: number): Promise<void> {
  const probe = createServer();
  try {
    await listen(probe, { host: "127.0.0.1", port });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    assert.fail(
      code === "EADDRINUSE"
        ? `port ${port} is already in use: the README's service (\`npm start\`) listens on ${README_GATEWAY_PORT} (REST) and ${README_CORE_PORT} (gRPC), ` +
            `so nothing else may hold them while these tests run (see what does: ss -ltnp 'sport = :${port}')`
        : `cannot check port ${port}: ${(error as Error).message}`,
    );
  }
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

function listen(server: Server, options: { host?: string; port?: number; path?: string }): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/**
 * Waits for this machine's turn on the README's ports: an abstract Unix socket
 * (Linux) held while the service runs, released by the kernel if this process
 * dies, so a crashed test never leaves a stale lock. Elsewhere there is no lock,
 * and two such test files at once fail on the port check instead.
 */
async function takeTurn(): Promise<() => void> {
  if (process.platform !== "linux") return () => {};
  const lock = await eventually(
    async () => {
      const lock = createServer();
      try {
        await listen(lock, { path: "\0generation-service-readme-ports" });
        return lock;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE") throw error;
        return undefined;
      }
    },
    Boolean,
    { timeoutMs: LOCK_TIMEOUT_MS, intervalMs: 250, what: `another test to give back the README's ports (${README_GATEWAY_PORT}, ${README_CORE_PORT})` },
  );
  lock!.unref();
  return () => lock!.close();
}

/** Process groups still running, killed if this process ends before their tests stop them. */
const live = new Set<ProcessGroup>();
let guarded = false;
function guardExit(): void {
  if (guarded) return;
  guarded = true;
  process.once("exit", () => {
    for (const group of live) group.kill("SIGKILL");
  });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(signal, () => {
      for (const group of live) group.kill("SIGKILL");
      // Then end as the signal would have ended this process.
      process.kill(process.pid, signal);
    });
  }
}

/** A bash command line in its own process group (npm, tsx and node below it), stopped as a whole. */
class ProcessGroup {
  private text = "";
  exited: string | undefined;

  private constructor(
    readonly command: string,
    private readonly child: ChildProcess,
  ) {}

  static spawn(command: string, options: { cwd: string; env: NodeJS.ProcessEnv }): ProcessGroup {
    const child = spawn("bash", ["-c", command], { cwd: options.cwd, env: options.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const group = new ProcessGroup(command, child);
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (group.text += chunk));
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (group.text += chunk));
    child.on("exit", (code, signal) => (group.exited = String(code ?? signal)));
    child.on("error", (error) => (group.exited = error.message));
    live.add(group);
    guardExit();
    return group;
  }

  output(): string {
    return this.text;
  }

  kill(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.child.pid!, signal);
    } catch {
      // no process of the group is left
    }
  }

  /** SIGTERM to the whole group, SIGKILL after STOP_TIMEOUT_MS; fails if a process of it is still alive after that. */
  async stop(): Promise<void> {
    if (this.child.pid === undefined) return;
    this.kill("SIGTERM");
    if (!(await this.gone(STOP_TIMEOUT_MS))) {
      this.kill("SIGKILL");
      if (!(await this.gone(KILL_TIMEOUT_MS))) throw new Error(`process group ${this.child.pid} (\`${this.command.trim()}\`) survived SIGKILL`);
    }
    live.delete(this);
  }

  private async gone(timeoutMs: number): Promise<boolean> {
    return eventually(() => !this.alive(), Boolean, { timeoutMs, intervalMs: 50, what: "the process group to end" }).then(
      () => true,
      () => false,
    );
  }

  /**
   * Whether a process of the group still runs. On Linux /proc tells, and
   * zombies do not count: an orphan that exited is not reaped when PID 1 does
   * not reap (as in some containers), yet it runs nothing and holds no port.
   */
  private alive(): boolean {
    const pgid = this.child.pid!;
    if (process.platform === "linux") {
      for (const pid of readdirSync("/proc")) {
        if (!/^\d+$/.test(pid)) continue;
        let stat: string;
        try {
          stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        } catch {
          continue; // it ended while we looked
        }
        // Fields after "(comm)": state, ppid, pgrp, …
        const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        if (Number(pgrp) === pgid && state !== "Z" && state !== "X") return true;
      }
      return false;
    }
    try {
      process.kill(-pgid, 0);
      return true;
    } catch {
      return false;
    }
  }
}
