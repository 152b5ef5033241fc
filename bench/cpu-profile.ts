/**
 * Summarises a V8 `.cpuprofile` (node --cpu-prof): where the main thread's
 * time went, by function (self time) and by code area (self time grouped by
 * package or source directory), and optionally writes folded stacks
 * (`frame;frame;frame count` lines) that flamegraph.pl, speedscope or
 * inferno turn into a flame graph.
 *
 *   tsx bench/cpu-profile.ts <file.cpuprofile> [--top N] [--folded out.folded]
 *     [--timeline] [--from S] [--to S]
 *
 * A service profiled across several loads (the bench's GET then gRPC loads
 * share one service) is read one load at a time: `--timeline` prints the
 * busy milliseconds of each second, `--from`/`--to` keep the samples of that
 * window (seconds since the profile started).
 */
import { readFileSync, writeFileSync } from "node:fs";

interface CallFrame { functionName: string; url: string; lineNumber: number }
interface ProfileNode { id: number; callFrame: CallFrame; children?: number[] }
interface Profile { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] }

export interface ProfileSummary {
  readonly totalMs: number;
  readonly idleMs: number;
  readonly byFunction: { name: string; ms: number; share: number }[];
  readonly byArea: { area: string; ms: number; share: number }[];
}

/** The code area a frame belongs to: an npm package, a directory of ours, node's internals, or V8's pseudo-frames. */
export function areaOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName === "(garbage collector)") return "GC";
    if (functionName === "(idle)") return "idle";
    if (functionName === "(program)") return "V8/native (program)";
    return `native (${functionName || "anonymous"})`;
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith("node:")) return `node:${url.slice(5).split("/")[0]}`;
  const ours = /\/(src|gen|bench)\/(.*)\/[^/]+$/.exec(url);
  if (ours) return `${ours[1]}/${ours[2]}`;
  return url.replace(/^file:\/\//, "");
}

function label(frame: CallFrame): string {
  const file = frame.url.replace(/^.*\/(node_modules\/|src\/|gen\/|bench\/)/, "$1").replace(/^file:\/\//, "");
  return `${frame.functionName || "(anonymous)"} ${file}:${frame.lineNumber + 1}`;
}

export function summarise(profile: Profile, top = 25): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  let totalUs = 0;
  let idleUs = 0;
  const fn = new Map<string, number>();
  const area = new Map<string, number>();
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame;
    totalUs += us;
    if (frame.functionName === "(idle)") { idleUs += us; continue; }
    fn.set(label(frame), (fn.get(label(frame)) ?? 0) + us);
    area.set(areaOf(frame), (area.get(areaOf(frame)) ?? 0) + us);
  }
  const busyUs = totalUs - idleUs;
  const rank = <K extends string>(m: Map<string, number>, key: K) =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k, us]) => ({ [key]: k, ms: us / 1000, share: us / busyUs }) as { [P in K]: string } & { ms: number; share: number });
  return { totalMs: totalUs / 1000, idleMs: idleUs / 1000, byFunction: rank(fn, "name"), byArea: rank(area, "area") };
}

/** The profile's samples taken from `fromS` to `toS` seconds after it started; the rest dropped. */
export function windowed(profile: Profile, fromS: number, toS: number): Profile {
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  let at = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    if (at >= fromS * 1e6 && at < toS * 1e6) {
      samples.push(profile.samples[i]!);
      timeDeltas.push(profile.timeDeltas[i] ?? 0);
    }
  }
  return { ...profile, samples, timeDeltas };
}

/** Busy (not idle) milliseconds in each second of the profile. */
export function timeline(profile: Profile): number[] {
  const idle = new Set(profile.nodes.filter((n) => n.callFrame.functionName === "(idle)").map((n) => n.id));
  const busy: number[] = [];
  let at = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    const second = Math.floor(at / 1e6);
    while (busy.length <= second) busy.push(0);
    if (!idle.has(profile.samples[i]!)) busy[second]! += delta / 1000;
  }
  return busy;
}

/** Folded stacks, one line per distinct stack: `root;…;leaf <microseconds>`. */
export function folded(profile: Profile): string {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const weights = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) weights.set(profile.samples[i]!, (weights.get(profile.samples[i]!) ?? 0) + (profile.timeDeltas[i] ?? 0));
  const lines: string[] = [];
  for (const [id, us] of weights) {
    const stack: string[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)!.callFrame;
      if (frame.functionName === "(root)") break;
      stack.unshift(label(frame).replace(/;/g, ","));
    }
    if (stack[0] === "(idle) :0") continue;
    lines.push(`${stack.join(";")} ${Math.round(us)}`);
  }
  return lines.join("\n") + "\n";
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [file, ...rest] = process.argv.slice(2);
  if (!file) {
    console.error("usage: tsx bench/cpu-profile.ts <file.cpuprofile> [--top N] [--folded out.folded] [--timeline] [--from S] [--to S]");
    process.exit(2);
  }
  const option = (name: string) => { const i = rest.indexOf(name); return i >= 0 ? rest[i + 1] : undefined; };
  const whole = JSON.parse(readFileSync(file, "utf8")) as Profile;
  if (rest.includes("--timeline")) {
    console.log(timeline(whole).map((ms, second) => `${second}s ${ms.toFixed(0)} ms busy`).join("\n"));
    process.exit(0);
  }
  const profile = option("--from") || option("--to") ? windowed(whole, Number(option("--from") ?? 0), Number(option("--to") ?? Infinity)) : whole;
  const summary = summarise(profile, Number(option("--top") ?? 25));
  const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
  console.log(`profile: ${summary.totalMs.toFixed(0)} ms sampled, ${summary.idleMs.toFixed(0)} ms idle\n`);
  console.log("| area (self time) | ms | share of busy |\n|---|---:|---:|");
  for (const a of summary.byArea) console.log(`| ${a.area} | ${a.ms.toFixed(0)} | ${pct(a.share)} |`);
  console.log("\n| function (self time) | ms | share of busy |\n|---|---:|---:|");
  for (const f of summary.byFunction) console.log(`| \`${f.name}\` | ${f.ms.toFixed(0)} | ${pct(f.share)} |`);
  const out = option("--folded");
  if (out) writeFileSync(out, folded(profile));
}
