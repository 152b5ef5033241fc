import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

/** The directories a Go tool installed by infra/tools.sh may be in: PATH, then $(go env GOBIN) and $(go env GOPATH)/bin. */
export function goToolDirs(): string[] {
  const dirs = (process.env.PATH ?? "").split(delimiter).filter(Boolean);
  try {
    const [gobin, gopath] = execFileSync("go", ["env", "GOBIN", "GOPATH"], { encoding: "utf8" }).split("\n");
    if (gobin) dirs.push(gobin);
    for (const path of (gopath ?? "").split(delimiter).filter(Boolean)) dirs.push(join(path, "bin"));
  } catch {
    // No Go on this machine: PATH is all there is.
  }
  return dirs;
}

/**
 * A Go tool installed by infra/tools.sh: on PATH or in $(go env GOBIN) / $(go env GOPATH)/bin.
 * Missing is a failure, not a skip: these clients are part of what the suite checks.
 */
export function goTool(name: string): string {
  for (const dir of goToolDirs()) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  assert.fail(`${name} not found on PATH or in $(go env GOPATH)/bin: run \`bash infra/tools.sh\` to install it`);
}

export interface ToolRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a tool without blocking the event loop (a server under test may live in this process). */
export function runTool(
  binary: string,
  args: readonly string[],
  options: { timeoutMs?: number; cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<ToolRun> {
  return new Promise((resolve) => {
    execFile(
      binary,
      args,
      { timeout: options.timeoutMs ?? 20_000, cwd: options.cwd, env: options.env, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
