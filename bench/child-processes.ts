/** What the benches share: a Node child process with its output kept, a poll for a condition, a process's memory and its tree's. */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";

export interface Running { readonly child: ChildProcess; output: string }

/** `node --import tsx ...args` in `cwd`, stdout and stderr gathered in `output`. */
export function runNode(args: string[], env: NodeJS.ProcessEnv, cwd: string): Running {
  const child = spawn(process.execPath, ["--import", "tsx", ...args], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  const running: Running = { child, output: "" };
  child.stdout!.on("data", (chunk) => (running.output += chunk));
  child.stderr!.on("data", (chunk) => (running.output += chunk));
  return running;
}

/** `probe()` until it answers something other than undefined, or throws after `timeoutMs`. */
export async function waitFor<T>(probe: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(50);
  }
}

/** A process's resident memory now and at its peak, and its open descriptors (Linux /proc). */
export function memory(pid: number) {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0);
  return { rssMiB: Math.round(kib("VmRSS") / 1024), peakMiB: Math.round(kib("VmHWM") / 1024), fds: readdirSync(`/proc/${pid}/fd`).length };
}

/** The gateway URL of a service child once it says it is ready (its log lines, LOG_LEVEL at least error). */
export function readyGatewayUrl(service: Running, timeoutMs = 60_000): Promise<string> {
  return waitFor(() => (/"msg":"ready"/.test(service.output) ? /"url":"([^"]+)","msg":"gateway/.exec(service.output)?.[1] : undefined), timeoutMs, "the service");
}

/** `root` and its descendants, from /proc. */
export function treePids(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // exited meanwhile
    }
  }
  const out: number[] = [];
  const visit = (pid: number) => { out.push(pid); for (const child of children.get(pid) ?? []) visit(child); };
  visit(root);
  return out;
}

/** Resident memory of the process tree, summed (MiB). */
export function treeRssMiB(root: number): number {
  return treePids(root).reduce((sum, pid) => {
    try {
      return sum + memory(pid).rssMiB;
    } catch {
      return sum;
    }
  }, 0);
}

/** A command's output, trimmed; "(unavailable)" when it fails (a report names what it could not read). */
export function sh(command: string, args: string[], cwd?: string): string {
  try {
    return execFileSync(command, args, { encoding: "utf8", cwd }).trim();
  } catch {
    return "(unavailable)";
  }
}

/** The commit a report was measured at, and whether src/ or bench/ differ from it. */
export function measuredCommit(root: string): { readonly commit: string; readonly dirty: string } {
  return {
    commit: sh("git", ["rev-parse", "--short", "HEAD"], root),
    dirty: sh("git", ["status", "--porcelain", "src", "bench"], root) ? " (working tree differs under src/ or bench/)" : "",
  };
}

/** Runs a bench's main with a 30-minute watchdog; `cleanUp` runs however it ends (its children killed, its files removed). */
export async function runBench(name: string, main: () => Promise<void>, cleanUp: () => void): Promise<void> {
  const watchdog = setTimeout(() => {
    process.stderr.write(`${name}: gave up after 30 minutes\n`);
    cleanUp();
    process.exit(2);
  }, 30 * 60_000);
  watchdog.unref();
  try {
    await main();
  } catch (error) {
    console.error(error);
    process.exitCode = 1;
  } finally {
    cleanUp();
  }
}
