import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { TABLE_FILE, TABLE_FILES } from "../../src/config/table.js";
import type { ToolRun } from "./go-tools.js";
import { REPO_ROOT } from "./repo.js";

/**
 * The command blocks of the README and of the documents beside it (CONTRIBUTING.md, docs/), as tests read them:
 * a fenced block that a test runs is marked by an HTML comment on the line right before its opening fence,
 *
 *     <!-- readme-test: go-codegen (optional words for the reader) -->
 *     ```sh
 *
 * and a shell block that no test runs says why, the same way:
 *
 *     <!-- readme-not-run: installs packages into your project -->
 *
 * (the walk-through's blocks, between its own markers in README.md, are all run by
 * test/repo/readme-walkthrough.test.ts). A marker that is missing, repeated,
 * or not right before a fence fails the test that asked for it, with the file and line.
 */

export const ROOT = REPO_ROOT;
export const README_PATH = join(ROOT, "README.md");
/** The document that holds the configuration table (`npm run docs:config` writes it). */
export const CONFIGURATION_DOC = TABLE_FILE;

/**
 * Every `readme-test` marker, the document that holds its block (by its path from the repository's root) and the
 * files that read it (the test, or the support module the test calls). test/repo/readme-blocks.test.ts checks
 * every direction: each marker of a document is listed here with that document, and each listed file names it.
 */
export const README_TESTS = {
  "start-service": { doc: "README.md", readers: ["test/support/readme-service.ts"] },
  "reader-env": { doc: "README.md", readers: ["test/support/readme-service.ts"] },
  "grpc-reflection": { doc: "docs/clients.md", readers: ["test/repo/readme-walkthrough.test.ts"] },
  "go-codegen-template": { doc: "docs/clients-protos.md", readers: ["test/repo/proto-codegen.test.ts"] },
  "go-codegen": { doc: "docs/clients-protos.md", readers: ["test/repo/proto-codegen.test.ts"] },
  "python-codegen": { doc: "docs/clients-protos.md", readers: ["test/repo/proto-codegen.test.ts"] },
  "java-build": { doc: "docs/clients-protos.md", readers: ["test/repo/proto-codegen-java.test.ts"] },
  "java-run": { doc: "docs/clients-protos.md", readers: ["test/repo/proto-codegen-java.test.ts"] },
  "java-protoc": { doc: "docs/clients-protos.md", readers: ["test/repo/proto-codegen-java.test.ts"] },
} as const satisfies Record<string, { readonly doc: string; readonly readers: readonly string[] }>;
export type ReadmeTestName = keyof typeof README_TESTS;

/**
 * The documents whose shell blocks are accounted for, by their path from the repository's root: README.md,
 * CONTRIBUTING.md and every markdown file under docs/.
 */
export function documentPaths(): string[] {
  const docs = readdirSync(join(ROOT, "docs"), { recursive: true, encoding: "utf8" })
    .filter((path) => path.endsWith(".md"))
    .map((path) => join("docs", path))
    .sort();
  return ["README.md", "CONTRIBUTING.md", ...docs];
}

/** A document of the repository, by its path from the root. */
export function readDoc(path: string): string {
  return readFileSync(join(ROOT, path), "utf8");
}

export const WALKTHROUGH_START = /^<!-- walkthrough:start\b.*-->\s*$/;
export const WALKTHROUGH_END = /^<!-- walkthrough:end\s*-->\s*$/;
const TEST_MARKER = /^<!-- readme-test: ([a-z0-9-]+)\b.*-->\s*$/;
const NOT_RUN_MARKER = /^<!-- readme-not-run: (.*?)\s*-->\s*$/;
/** Anything that looks like one of our markers, so a misspelt one is reported instead of ignored. */
const ANY_MARKER = /^<!-- readme-/;
const FENCE = /^```(.*)$/;
/** Info strings of blocks a reader pastes into a shell. */
const SHELL_INFO = new Set(["sh", "bash", "shell", "console", "zsh"]);

export interface FencedBlock {
  /** The info string after the opening fence (`sh`, `yaml`, …). */
  readonly info: string;
  readonly body: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  /** The line right before the opening fence (a marker, when there is one). */
  readonly before: string;
}

export function readReadme(): string {
  return readFileSync(README_PATH, "utf8");
}

/** Every fenced block of the markdown, in order. */
export function fencedBlocks(markdown: string, file = "README.md"): FencedBlock[] {
  const lines = markdown.split("\n");
  const blocks: FencedBlock[] = [];
  let open: { info: string; body: string[]; line: number; before: string } | undefined;
  lines.forEach((line, i) => {
    const fence = FENCE.exec(line);
    if (!open) {
      if (fence) open = { info: fence[1]!.trim(), body: [], line: i + 1, before: lines[i - 1] ?? "" };
    } else if (fence && fence[1]!.trim() === "") {
      blocks.push({ info: open.info, body: open.body.join("\n"), line: open.line, before: open.before });
      open = undefined;
    } else {
      open.body.push(line);
    }
  });
  if (open) throw new Error(`${file} line ${open.line}: the fenced block is never closed`);
  return blocks;
}

/**
 * The block marked `<!-- readme-test: NAME … -->` in its document (README_TESTS). Fails, naming the file and line,
 * when the marker is missing or repeated, or is not right before an opening fence.
 */
export function readmeBlock(name: ReadmeTestName, markdown = readDoc(README_TESTS[name].doc)): FencedBlock {
  const file = README_TESTS[name].doc;
  const lines = markdown.split("\n");
  const markers = lines.flatMap((line, i) => (TEST_MARKER.exec(line)?.[1] === name ? [i + 1] : []));
  assert.ok(markers.length > 0, `${file} has no <!-- readme-test: ${name} --> marker: the block a test runs must be marked right before its opening fence`);
  assert.equal(markers.length, 1, `${file} has <!-- readme-test: ${name} --> on lines ${markers.join(", ")}: a marker names one block`);
  const block = fencedBlocks(markdown, file).find((candidate) => candidate.line === markers[0]! + 1);
  assert.ok(block, `${file} line ${markers[0]}: <!-- readme-test: ${name} --> must be right before a fenced block's opening line`);
  assert.ok(block.body.trim() !== "", `${file} line ${block.line}: the block marked ${name} is empty`);
  return block;
}

export type ShellBlockStatus =
  | { readonly kind: "walkthrough" }
  | { readonly kind: "test"; readonly name: string }
  | { readonly kind: "not-run"; readonly reason: string }
  | { readonly kind: "unmarked" };

/** Every shell block of a document, and whether (and by what) it is run. */
export function shellBlocks(markdown: string, file = "README.md"): (FencedBlock & { readonly status: ShellBlockStatus })[] {
  const lines = markdown.split("\n");
  const start = lines.findIndex((line) => WALKTHROUGH_START.test(line)) + 1;
  const end = lines.findIndex((line) => WALKTHROUGH_END.test(line)) + 1;
  return fencedBlocks(markdown, file)
    .filter((block) => SHELL_INFO.has(block.info.split(/\s+/)[0]!))
    .map((block) => {
      const test = TEST_MARKER.exec(block.before);
      const notRun = NOT_RUN_MARKER.exec(block.before);
      const status: ShellBlockStatus = test
        ? { kind: "test", name: test[1]! }
        : notRun
          ? { kind: "not-run", reason: notRun[1]! }
          : start > 0 && block.line > start && block.line < end
            ? { kind: "walkthrough" }
            : { kind: "unmarked" };
      return { ...block, status };
    });
}

/** Every `<!-- readme-… -->` line, with its line number: the markers, and any misspelt one. */
export function markerLines(markdown: string): { line: number; text: string; test?: string; notRun?: string }[] {
  return markdown.split("\n").flatMap((text, i) => {
    if (!ANY_MARKER.test(text)) return [];
    return [{ line: i + 1, text, test: TEST_MARKER.exec(text)?.[1], notRun: NOT_RUN_MARKER.exec(text)?.[1] }];
  });
}

/**
 * The variables of the configuration table (docs/configuration.md): a reader's terminal has
 * none of them set (the service "starts with none set"), so commands that a
 * test runs as the reader would must not inherit them from the test's own
 * environment (a CI job may export KAFKA_BROKERS, say).
 */
export function configurationVariables(markdown = TABLE_FILES.map((file) => readDoc(file)).join("\n")): string[] {
  const names = [...markdown.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|/gm)].map((match) => match[1]!);
  assert.ok(names.length > 10, `the configuration tables of ${TABLE_FILES.join(", ")} list the service's variables (found ${names.length})`);
  return names;
}

/** The test's environment without the service's configuration variables: what a reader's fresh terminal has. */
export function readerEnvironment(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of configurationVariables()) delete env[name];
  return { ...env, ...extra };
}

/**
 * A copy of the parts of this checkout that README commands read (for example
 * `proto/`, `buf.yaml`, `test/fixtures/java-client`), with `node_modules`
 * linked, so that commands the README runs "from the repository root" can be
 * run exactly as written without writing into the repository (`gen/go`,
 * `gen/python`, `gen/java`, Maven's `target/`). Build output (`target/`) is
 * never copied: every run starts from the sources as they are now.
 */
export function checkoutCopy(paths: readonly string[]): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), "readme-checkout-"));
  for (const path of paths) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    cpSync(join(ROOT, path), join(dir, path), { recursive: true, filter: (source) => basename(source) !== "target" });
  }
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Runs a README block as a reader pastes it into bash (`set -euo pipefail`),
 * in its own process group: on the deadline the whole group (Maven, the JVM, …)
 * is killed, not just bash, so nothing outlives the test.
 */
export function runBlock(block: string, options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<ToolRun> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-euo", "pipefail", "-c", block], { cwd: options.cwd, env: options.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const killGroup = () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // the group is gone already
      }
    };
    const timer = setTimeout(() => {
      stderr += `\n(killed: the block ran longer than ${options.timeoutMs} ms)`;
      killGroup();
    }, options.timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      // Whatever the block left in the background does not outlive it.
      killGroup();
      resolve({ code: code ?? (signal ? 128 : -1), stdout, stderr });
    });
  });
}

/** Runs a documented block and fails with the block, its exit code and its output unless it exits 0; returns its stdout. */
export async function runBlockOk(name: string, block: FencedBlock, options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<string> {
  const run = await runBlock(block.body, options);
  assert.equal(
    run.code,
    0,
    `the ${name} block (line ${block.line} of its document) exited ${run.code}:\n${block.body}\n--- stdout ---\n${run.stdout}\n--- stderr ---\n${run.stderr}`,
  );
  return run.stdout;
}
