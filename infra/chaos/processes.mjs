// Everything the chaos run starts is recorded here (process groups, iptables rules) and undone however the run ends:
// its normal end, an error, Ctrl-C or SIGTERM. A run killed with SIGKILL leaves a pid file the next run cleans up first.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const INFRA_DIR = join(fileURLToPath(new URL(".", import.meta.url)), "..");
export const REPO_DIR = join(INFRA_DIR, "..");
export const STATE_DIR = join(REPO_DIR, ".infra");
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export const log = (...parts) => process.stderr.write(`[chaos ${new Date().toISOString().slice(11, 19)}] ${parts.join(" ")}\n`);

/** Tag of this run's iptables rules (a comment match), so only they are removed. */
export const RULE_TAG = `gen-chaos-${process.pid}`;
const groups = new Map(); // name -> pid (leader of its own process group)
let pidFile = null;

function save() {
  if (pidFile) writeFileSync(pidFile, JSON.stringify({ pids: [...groups.values()], tag: RULE_TAG }));
}
export function registerGroup(name, pid) {
  groups.set(name, pid);
  save();
}
export function forgetGroup(name, pid) {
  if (groups.get(name) === pid) groups.delete(name);
  save();
}
export const pidOf = (name) => groups.get(name);

const signalGroup = (pid, signal) => {
  try {
    process.kill(-pid, signal);
  } catch { /* already gone */ }
};
export function signal(name, sig) {
  const pid = groups.get(name);
  if (pid) signalGroup(pid, sig);
  return pid;
}

/** Runs iptables; the rules this run adds all carry its tag. */
export function iptables(args) {
  execFileSync("iptables", args, { stdio: ["ignore", "ignore", "pipe"] });
}
/**
 * Cuts a node off: every packet to its address, and every packet its process sends (matched by its group id: it opens
 * connections from 127.0.0.1, so its address alone would not catch them), is dropped on the loopback interface.
 */
export function isolate(host, gid) {
  const tag = ["-m", "comment", "--comment", RULE_TAG, "-j", "DROP"];
  iptables(["-I", "INPUT", "-i", "lo", "-d", `${host}/32`, ...tag]);
  iptables(["-I", "OUTPUT", "-o", "lo", "-d", `${host}/32`, ...tag]);
  iptables(["-I", "OUTPUT", "-o", "lo", "-m", "owner", "--gid-owner", gid, ...tag]);
}
/** Removes this run's rules (or, given a tag, a dead run's). */
export function healAll(tag = RULE_TAG) {
  let rules;
  try {
    rules = execFileSync("iptables", ["-S"]).toString().split("\n");
  } catch {
    return;
  }
  for (const rule of rules) {
    if (!rule.startsWith("-A ") || !rule.split(" ").some((word) => word === tag || word === `"${tag}"`)) continue;
    const args = rule.replace(/^-A /, "-D ").split(" ").map((a) => a.replace(/^"(.*)"$/, "$1"));
    try {
      iptables(args);
    } catch { /* removed meanwhile */ }
  }
}

/** Stops every recorded group (continued first, so a paused one dies too) and removes the run's rules. */
export function stopEverything() {
  healAll();
  for (const pid of groups.values()) {
    signalGroup(pid, "SIGCONT");
    signalGroup(pid, "SIGKILL");
  }
  groups.clear();
  save();
}

/** Cleans up after an earlier run that was killed outright, then records this run's pids in `file`. */
export function takeOver(dir, file) {
  if (existsSync(dir)) {
    for (const entry of readdirSync(dir)) {
      const old = join(dir, entry, "pids.json");
      if (!existsSync(old)) continue;
      try {
        const { pids, tag } = JSON.parse(readFileSync(old, "utf8"));
        for (const pid of pids) {
          signalGroup(pid, "SIGCONT");
          signalGroup(pid, "SIGKILL");
        }
        healAll(tag);
        writeFileSync(old, JSON.stringify({ pids: [], tag }));
      } catch { /* unreadable: nothing to do */ }
    }
  }
  pidFile = file;
  save();
}

let stopping = false;
/** Makes the process stop everything it started on exit, Ctrl-C and SIGTERM. */
export function stopOnExit() {
  process.on("exit", stopEverything);
  for (const [sig, code] of [["SIGINT", 130], ["SIGTERM", 143], ["SIGHUP", 129]]) {
    process.on(sig, () => {
      if (stopping) return;
      stopping = true;
      log(`${sig}: stopping everything`);
      stopEverything();
      process.exit(code);
    });
  }
}
