/** What the benches share: a Node child process with its output kept, a poll for a condition, a process's memory and its tree's. */
import { spawn, type ChildProcess } from "node:child_process";
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
