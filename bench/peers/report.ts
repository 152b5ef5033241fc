/**
 * The report of `npm run bench:peers` (bench/peers/run.ts): the table, the baseline, the sweep and the goal
 * checks, from what run.ts measured. Every figure is a gateway's minus the mock's, same step.
 */
import type { StreamResult } from "../stream-client.js";
import type { RequestResult } from "./request-client.js";

/** The concurrency the req/s, CPU and stream figures are read at. */
export const AT = 32;
/** Bounds on the added p99 for the sustained req/s (ms). */
export const BOUNDS_MS = [10, 50] as const;

export interface Measured {
  readonly name: string;
  readonly does: string;
  readonly unary: Map<number, RequestResult>;
  readonly streams: Map<number, StreamResult>;
  readonly rssIdle: number;
  readonly rssAfter: number;
}

export const fmt = (n: number | undefined, digits = 1) => (n !== undefined && Number.isFinite(n) ? n.toFixed(digits) : "–");
const signed = (n: number) => (Number.isFinite(n) ? (n < 0 ? `−${fmt(-n)}` : `+${fmt(n)}`) : "–");
const rps = (n: number | undefined) => (n !== undefined && Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "–");

function addedP99(m: Measured, base: Measured, concurrency: number): number {
  const r = m.unary.get(concurrency);
  const b = base.unary.get(concurrency);
  return r && b ? r.p99 - b.p99 : NaN;
}

/** The most req/s of a step with no error whose added p99 is within the bound, and its concurrency. */
function bestWithin(m: Measured, base: Measured, boundMs: number): { rps: number; concurrency: number } | undefined {
  let best: { rps: number; concurrency: number } | undefined;
  for (const [concurrency, r] of m.unary) {
    if (r.errors === 0 && addedP99(m, base, concurrency) <= boundMs && (!best || r.rps > best.rps)) best = { rps: r.rps, concurrency };
  }
  return best;
}

const cpuPer1000 = (m: Measured) => {
  const r = m.unary.get(AT);
  return r && r.ok > 0 ? (r.cpuSeconds / r.ok) * 1000 : NaN;
};

function errorsOf(m: Measured): { count: number; samples: string[] } {
  let count = 0;
  const samples: string[] = [];
  for (const r of m.unary.values()) { count += r.errors; samples.push(...r.errorSamples); }
  for (const s of m.streams.values()) { count += s.failures; samples.push(...s.failureSamples); }
  return { count, samples: [...new Set(samples)].slice(0, 2) };
}

function streamCell(m: Measured, base: Measured, concurrency: number, which: "firstEvent" | "whole"): string {
  const s = m.streams.get(concurrency);
  const b = base.streams.get(concurrency);
  if (!s || !b) return "–";
  return `${signed(s[which].p50 - b[which].p50)} / ${signed(s[which].p99 - b[which].p99)}`;
}

export function row(m: Measured, base: Measured): string {
  const one = m.unary.get(1);
  const b1 = base.unary.get(1);
  const within = BOUNDS_MS.map((bound) => {
    const best = bestWithin(m, base, bound);
    return best ? `${rps(best.rps)} (${best.concurrency})` : "none";
  });
  const at = m.unary.get(AT);
  const errors = errorsOf(m);
  const cells = [
    `**${m.name}**: ${m.does}`,
    one && b1 ? `${signed(one.p50 - b1.p50)} / ${signed(one.p99 - b1.p99)}` : "–",
    ...within,
    at ? `${rps(at.rps)}${at.errors ? ` (${at.errors} errors)` : ""}` : "–",
    streamCell(m, base, 1, "firstEvent"), streamCell(m, base, AT, "firstEvent"),
    streamCell(m, base, 1, "whole"), streamCell(m, base, AT, "whole"),
    fmt(cpuPer1000(m), 2),
    `${fmt(m.rssIdle, 0)} → ${fmt(m.rssAfter, 0)}`,
    errors.count ? `**${errors.count}** (${errors.samples.join("; ").replace(/\|/g, "/").replace(/\s+/g, " ").slice(0, 160)})` : "0",
  ];
  return `| ${cells.join(" | ")} |`;
}

export function baselineLine(base: Measured): string {
  const one = base.unary.get(1);
  const at = base.unary.get(AT);
  const s1 = base.streams.get(1);
  const s32 = base.streams.get(AT);
  return (
    `The mock called directly (the baseline each figure subtracts), absolute: request p50/p99 at 1 in flight ${fmt(one?.p50)} / ${fmt(one?.p99)} ms, ` +
    `${rps(at?.rps)} req/s at ${AT} (p99 ${fmt(at?.p99)} ms); stream first event p50/p99 ${fmt(s1?.firstEvent.p50)} / ${fmt(s1?.firstEvent.p99)} ms at 1, ` +
    `${fmt(s32?.firstEvent.p50)} / ${fmt(s32?.firstEvent.p99)} ms at ${AT}; whole stream ${fmt(s1?.whole.p50)} / ${fmt(s1?.whole.p99)} ms at 1, ` +
    `${fmt(s32?.whole.p50)} / ${fmt(s32?.whole.p99)} ms at ${AT}; its errors ${errorsOf(base).count}.`
  );
}

export function sweepTable(all: Measured[], base: Measured, steps: readonly number[]): string[] {
  const lines = [
    `| in flight | mock: req/s, p99 ms | ${all.map((m) => `${m.name}: req/s, p99 ms (added), errors`).join(" | ")} |`,
    `|---:|---:|${all.map(() => "---:").join("|")}|`,
  ];
  for (const concurrency of steps) {
    const b = base.unary.get(concurrency);
    const cells = all.map((m) => {
      const r = m.unary.get(concurrency);
      return r ? `${rps(r.rps)}, ${fmt(r.p99)} (${signed(addedP99(m, base, concurrency))}), ${r.errors}` : "not run";
    });
    lines.push(`| ${concurrency} | ${b ? `${rps(b.rps)}, ${fmt(b.p99)}` : "–"} | ${cells.join(" | ")} |`);
  }
  return lines;
}

export function goalChecks(all: Measured[], base: Measured): string[] {
  const ours = all.find((m) => m.name === "this service");
  const portkey = all.find((m) => m.name === "Portkey");
  const peers = all.filter((m) => m !== ours);
  const verdict = (pass: boolean) => (pass ? "PASS" : "**FAIL**");
  const lines: string[] = [];
  if (!ours) return ["Goal checks: this service was not measured (BENCH_PEERS_ONLY)."];
  const clean = errorsOf(ours).count === 0;
  if (portkey) {
    const a = addedP99(ours, base, 1);
    const b = addedP99(portkey, base, 1);
    const ratio = a / b;
    lines.push(`- Added p99 at 1 in flight ≤ 0.6× Portkey's: ${signed(a)} ms vs ${signed(b)} ms = ${b > 0 ? `${fmt(ratio, 2)}×` : "– (Portkey added none)"} → ${verdict(clean && b > 0 && ratio <= 0.6)}`);
    const ob = bestWithin(ours, base, 50)?.rps ?? 0;
    const pb = bestWithin(portkey, base, 50)?.rps ?? 0;
    const within50 = (n: number) => (n > 0 ? rps(n) : "none");
    lines.push(`- Sustained req/s at the 50 ms bound ≥ 2× Portkey's: ${within50(ob)} vs ${within50(pb)} = ${pb > 0 ? `${fmt(ob / pb, 2)}×` : "–"} → ${verdict(clean && pb > 0 && ob >= 2 * pb)}`);
    const oc = cpuPer1000(ours);
    const pc = cpuPer1000(portkey);
    lines.push(`- CPU per 1,000 requests ≤ 0.6× Portkey's: ${fmt(oc, 2)} s vs ${fmt(pc, 2)} s = ${fmt(oc / pc, 2)}× → ${verdict(oc <= 0.6 * pc)}`);
  } else {
    lines.push("- The three checks against Portkey: Portkey was not measured (BENCH_PEERS_ONLY).");
  }
  if (peers.length) {
    const lowest = Math.min(...peers.map((m) => m.rssAfter));
    lines.push(`- RSS after load below every peer's: ${fmt(ours.rssAfter, 0)} MiB vs ${peers.map((m) => `${m.name} ${fmt(m.rssAfter, 0)} MiB`).join(", ")} = ${fmt(ours.rssAfter / lowest, 2)}× the lowest → ${verdict(ours.rssAfter < lowest)}`);
  } else {
    lines.push("- RSS after load below every peer's: no peer was measured (BENCH_PEERS_ONLY).");
  }
  const s = ours.streams.get(AT);
  const b = base.streams.get(AT);
  const first = s && b ? s.firstEvent.p99 - b.firstEvent.p99 : NaN;
  lines.push(`- Stream first-event added p99 at ${AT} in flight ≤ 10 ms: ${signed(first)} ms → ${verdict(Boolean(s) && s!.failures === 0 && first <= 10)}`);
  return lines;
}
