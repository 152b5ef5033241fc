/**
 * Scans the logs a test run captured (LOG_CAPTURE_DIR) for secrets: API keys,
 * owner tokens, panel sessions, webhook secrets, admin tokens, signed-URL
 * signatures, `?key=` and bearer credentials. Any match fails the run, with
 * the file and the line (the secret itself masked). Also fails when nothing
 * was captured: a scan of nothing proves nothing.
 *
 *   tsx test/support/scan-logs.ts <dir>
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ADMIN_TOKEN } from "./harness.js";

export const SECRET_PATTERNS: readonly [string, RegExp][] = [
  ["API key", /gsk_[A-Za-z0-9_-]{16,}/],
  ["owner token", /gso_[A-Za-z0-9_-]{16,}/],
  ["panel session", /gps1\.[A-Za-z0-9_-]{16,}/],
  ["webhook secret", /whsec_[A-Za-z0-9+/=]{16,}/],
  ["generated admin token", /adm_[A-Za-z0-9_-]{16,}/],
  ["the tests' admin token", new RegExp(ADMIN_TOKEN)],
  ["signed-URL signature", /[?&]signature=[0-9a-f]{16,}/],
  ["key in a query", /[?&]key=[^&\s"]{4,}/],
  ["bearer credential", /Bearer [A-Za-z0-9._~+/-]{8,}/],
];

/** The secrets found in `text`, by kind and line (the match masked). */
export function secretsIn(text: string): string[] {
  const found: string[] = [];
  text.split("\n").forEach((line, index) => {
    for (const [kind, pattern] of SECRET_PATTERNS) {
      const match = pattern.exec(line);
      if (match) found.push(`line ${index + 1}: ${kind}: ${line.replace(match[0], `${match[0].slice(0, 8)}…`).slice(0, 300)}`);
    }
  });
  return found;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const dir = process.argv[2];
  if (!dir) throw new Error("usage: scan-logs.ts <dir>");
  const files = readdirSync(dir).filter((name) => name.endsWith(".log"));
  let lines = 0;
  const problems: string[] = [];
  for (const name of files) {
    const text = readFileSync(join(dir, name), "utf8");
    lines += text.split("\n").filter(Boolean).length;
    for (const found of secretsIn(text)) problems.push(`${name} ${found}`);
  }
  if (lines === 0) {
    console.error(`scan-logs: no log lines captured in ${dir}`);
    process.exit(1);
  }
  if (problems.length > 0) {
    console.error(`scan-logs: ${problems.length} secrets in the logs:\n${problems.slice(0, 50).join("\n")}`);
    process.exit(1);
  }
  console.log(`scan-logs: ${lines} log lines in ${files.length} files, no secret found`);
}
