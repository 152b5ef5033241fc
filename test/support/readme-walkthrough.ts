import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fencedBlocks, WALKTHROUGH_END, WALKTHROUGH_START, type FencedBlock } from "./readme-blocks.js";

/**
 * The README's walk-through, as a test reads it: the fenced blocks between
 * `<!-- walkthrough:start … -->` and `<!-- walkthrough:end -->`.
 * - the ```sh block marked `<!-- readme-test: start-service -->` starts the
 *   service (`npm start`): a reader runs it in a terminal of its own, and the
 *   test runs it in the background (test/support/readme-service.ts);
 * - every other ```sh block (the exports of BASE_URL and ADMIN_TOKEN first) is
 *   run, in order, exactly as written, in one bash;
 * - ```text / ```json blocks would be example output, and are not run.
 * Any other fence inside the markers is an error, so a command block can
 * never be skipped silently because of its info string.
 */
export interface Walkthrough {
  /** The block that starts the service (run in the background, not in the walk-through's shell). */
  readonly start: FencedBlock;
  /** The blocks run in order in one shell. */
  readonly run: readonly string[];
}

const START_SERVICE_MARKER = /^<!-- readme-test: start-service\b/;
const OUTPUT_INFO = new Set(["text", "json"]);

export function readWalkthrough(markdown: string): Walkthrough {
  const lines = markdown.split("\n");
  const starts = lines.flatMap((line, i) => (WALKTHROUGH_START.test(line) ? [i + 1] : []));
  const ends = lines.flatMap((line, i) => (WALKTHROUGH_END.test(line) ? [i + 1] : []));
  if (starts.length !== 1 || ends.length !== 1 || ends[0]! < starts[0]!) {
    throw new Error(`README.md needs exactly one <!-- walkthrough:start … --> followed by one <!-- walkthrough:end -->; found ${starts.length} start and ${ends.length} end markers`);
  }
  const inside = fencedBlocks(markdown).filter((block) => block.line > starts[0]! && block.line < ends[0]!);
  const starters: FencedBlock[] = [];
  const run: string[] = [];
  for (const block of inside) {
    if (block.info === "sh" && START_SERVICE_MARKER.test(block.before)) starters.push(block);
    else if (block.info === "sh") run.push(block.body);
    else if (!OUTPUT_INFO.has(block.info)) {
      throw new Error(`README.md line ${block.line}: a walk-through block must be \`\`\`sh (run by the test), not \`\`\`${block.info}`);
    }
  }
  if (starters.length !== 1) {
    throw new Error(`README.md: the walk-through needs exactly one \`\`\`sh block marked <!-- readme-test: start-service -->, found ${starters.length}`);
  }
  return { start: starters[0]!, run };
}

/** The commands of a block: lines joined across trailing backslashes, without blank and comment lines. */
export function commandsOf(block: string): string[] {
  return block
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
}

const BLOCK_MARK = "@@walkthrough-block";
const VARS_MARK = "@@walkthrough-vars@@";

export interface WalkthroughRun {
  readonly exitCode: number | null;
  /** Each block's standard output, for the blocks that started. */
  readonly outputs: string[];
  readonly stdout: string;
  readonly stderr: string;
  /** The shell variables read after the last block, when every block succeeded. */
  readonly vars: Record<string, string>;
}

/**
 * Runs the blocks in order in ONE bash process (so shell variables carry from
 * block to block), with `set -euo pipefail`: the first command that fails
 * ends the run, and an ERR trap names it on stderr. A marker line before each
 * block separates their outputs. After the last block, `readVars` are printed
 * (a name the walk-through never set fails the run, under `set -u`).
 */
export async function runWalkthrough(
  blocks: readonly string[],
  options: { env: NodeJS.ProcessEnv; cwd: string; readVars: readonly string[]; timeoutMs: number },
): Promise<WalkthroughRun> {
  const script = [
    "set -euo pipefail",
    "shopt -s inherit_errexit",
    `trap 'printf "walk-through command failed (exit %s): %s\\n" "$?" "$BASH_COMMAND" >&2' ERR`,
    ...blocks.flatMap((block, i) => [`printf '\\n${BLOCK_MARK} ${i}@@\\n'`, block]),
    `printf '\\n${VARS_MARK}\\n'`,
    ...options.readVars.map((name) => `printf '%s=%s\\n' ${name} "$${name}"`),
  ].join("\n");
  // The script lives outside `cwd`, so the working directory holds only what the commands wrote.
  const scriptDir = await mkdtemp(join(tmpdir(), "readme-walkthrough-script-"));
  const file = join(scriptDir, "walkthrough.sh");
  let stdout = "";
  let stderr = "";
  let exitCode: number | null;
  try {
    await writeFile(file, script + "\n");
    // Its own process group: on the deadline every command it started (curl, grpcurl, …) is killed with it.
    const child = spawn("bash", [file], { cwd: options.cwd, env: options.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const killGroup = () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // the group is gone already
      }
    };
    const timer = setTimeout(() => {
      stderr += `\n(killed: the walk-through ran longer than ${options.timeoutMs} ms)`;
      killGroup();
    }, options.timeoutMs);
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    exitCode = await new Promise<number | null>((resolve, reject) => {
      child.on("error", reject);
      child.on("close", (code) => resolve(code));
    }).finally(() => {
      clearTimeout(timer);
      killGroup();
    });
  } finally {
    await rm(scriptDir, { recursive: true, force: true });
  }
  const [beforeVars, varsText = ""] = stdout.split(`\n${VARS_MARK}\n`);
  const outputs = beforeVars!.split(new RegExp(`\\n${BLOCK_MARK} \\d+@@\\n`)).slice(1);
  const vars = Object.fromEntries(
    varsText.split("\n").filter((line) => line.includes("=")).map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
  return { exitCode, outputs, stdout, stderr, vars };
}

/**
 * Every top-level JSON object printed in `text` (one line or pretty-printed
 * over many), in order; other output (status words, headers, SSE prefixes)
 * around them is skipped.
 */
export function jsonObjectsIn(text: string): unknown[] {
  const found: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"' && depth > 0) inString = true;
    else if (c === "{") {
      if (depth++ === 0) start = i;
    } else if (c === "}" && depth > 0 && --depth === 0) {
      try {
        found.push(JSON.parse(text.slice(start, i + 1)));
      } catch {
        // Braces in plain output that do not make JSON: not an object the walk-through printed.
      }
    }
  }
  return found;
}
