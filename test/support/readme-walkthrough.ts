import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * The README's walk-through, as a test reads it: the fenced blocks between
 * `<!-- walkthrough:start … -->` and `<!-- walkthrough:end -->`.
 * - ```sh blocks are run, in order, exactly as written;
 * - ```sh setup blocks (start the service, export the variables) are not run:
 *   the test starts its own service and exports the same variables for it;
 * - ```text / ```json blocks would be example output, and are not run.
 * Any other fence inside the markers is an error, so a command block can
 * never be skipped silently because of its info string.
 */
export interface Walkthrough {
  readonly setup: readonly string[];
  readonly run: readonly string[];
}

const START = /^<!-- walkthrough:start\b.*-->\s*$/;
const END = /^<!-- walkthrough:end\s*-->\s*$/;
const FENCE = /^```(.*)$/;
const OUTPUT_INFO = new Set(["text", "json"]);

export function readWalkthrough(markdown: string): Walkthrough {
  const lines = markdown.split("\n");
  const starts = lines.flatMap((line, i) => (START.test(line) ? [i] : []));
  const ends = lines.flatMap((line, i) => (END.test(line) ? [i] : []));
  if (starts.length !== 1 || ends.length !== 1 || ends[0]! < starts[0]!) {
    throw new Error(`README.md needs exactly one <!-- walkthrough:start … --> followed by one <!-- walkthrough:end -->; found ${starts.length} start and ${ends.length} end markers`);
  }
  const setup: string[] = [];
  const run: string[] = [];
  let open: { info: string; body: string[]; line: number } | undefined;
  for (let i = starts[0]! + 1; i < ends[0]!; i++) {
    const line = lines[i]!;
    const fence = FENCE.exec(line);
    if (!open) {
      if (fence) open = { info: fence[1]!.trim(), body: [], line: i + 1 };
      continue;
    }
    if (!fence || fence[1]!.trim() !== "") {
      open.body.push(line);
      continue;
    }
    const block = open.body.join("\n");
    if (open.info === "sh") run.push(block);
    else if (open.info === "sh setup") setup.push(block);
    else if (!OUTPUT_INFO.has(open.info)) {
      throw new Error(`README.md line ${open.line}: a walk-through block must be \`\`\`sh (run by the test) or \`\`\`sh setup, not \`\`\`${open.info}`);
    }
    open = undefined;
  }
  if (open) throw new Error(`README.md line ${open.line}: the block is not closed before <!-- walkthrough:end -->`);
  return { setup, run };
}

/** The commands of a block: lines joined across trailing backslashes, without blank and comment lines. */
export function commandsOf(block: string): string[] {
  return block
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
}

/** The names the setup blocks `export` (what a reader sets once, and the test sets for its service). */
export function exportedNames(setup: readonly string[]): string[] {
  const names = setup.flatMap(commandsOf).flatMap((command) => {
    const exported = /^export\s+(.*)$/.exec(command);
    return exported ? [...exported[1]!.matchAll(/(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=/g)].map((m) => m[1]!) : [];
  });
  return [...new Set(names)].sort();
}

const quote = (value: string) => `'${value.replaceAll("'", `'\\''`)}'`;
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
  options: { env: Record<string, string>; cwd: string; readVars: readonly string[]; timeoutMs: number },
): Promise<WalkthroughRun> {
  const script = [
    "set -euo pipefail",
    "shopt -s inherit_errexit",
    `trap 'printf "walk-through command failed (exit %s): %s\\n" "$?" "$BASH_COMMAND" >&2' ERR`,
    ...Object.entries(options.env).map(([name, value]) => `export ${name}=${quote(value)}`),
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
    const child = spawn("bash", [file], { cwd: options.cwd, timeout: options.timeoutMs, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    exitCode = await new Promise<number | null>((resolve, reject) => {
      child.on("error", reject);
      child.on("close", (code) => resolve(code));
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
