/**
 * The peers of `npm run bench:peers`, installed on first use into `.peers/` (ignored by git) at the pinned
 * versions, and skipped when a marker says that version is already there.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const PORTKEY_VERSION = "1.15.2";
export const LITELLM_VERSION = "1.106.12";

export interface Peers {
  /** node runs this file to start Portkey's gateway. */
  readonly portkeyServer: string;
  /** The `litellm` CLI of the venv. */
  readonly litellm: string;
  readonly python: string;
  readonly pythonVersion: string;
  /** Why no Go or Rust gateway runs here (one line). */
  readonly bifrost: string;
}

/** Runs a step of an install, its output shown: an install that fails must say why. */
function step(command: string, args: string[], cwd: string): void {
  process.stderr.write(`· ${command} ${args.join(" ")}\n`);
  execFileSync(command, args, { cwd, stdio: ["ignore", "inherit", "inherit"] });
}

/** `dir` holds `version` when its marker says so; otherwise it is emptied and `install` runs, then the marker is written. */
function once(dir: string, version: string, install: () => void): void {
  const marker = join(dir, ".installed");
  if (existsSync(marker) && readFileSync(marker, "utf8").trim() === version) return;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  install();
  writeFileSync(marker, `${version}\n`);
}

export function ensurePeers(root: string): Peers {
  const peers = join(root, ".peers");
  const portkeyDir = join(peers, "portkey");
  once(portkeyDir, PORTKEY_VERSION, () =>
    step("npm", ["install", "--prefix", portkeyDir, "--save-exact", "--no-audit", "--no-fund", `@portkey-ai/gateway@${PORTKEY_VERSION}`], root),
  );
  const venv = join(peers, "litellm-venv");
  once(venv, LITELLM_VERSION, () => {
    step("python3", ["-m", "venv", venv], root);
    step(join(venv, "bin/pip"), ["install", "--quiet", "--disable-pip-version-check", `litellm[proxy]==${LITELLM_VERSION}`], root);
  });
  const python = join(venv, "bin/python");
  return {
    portkeyServer: join(portkeyDir, "node_modules/@portkey-ai/gateway/build/start-server.js"),
    litellm: join(venv, "bin/litellm"),
    python,
    pythonVersion: execFileSync(python, ["--version"], { encoding: "utf8" }).trim(),
    bifrost:
      "Bifrost (Go) not run: @maximhq/bifrost@1.6.3 (npm) downloads its binary from getbifrost.ai when it starts (ENOTFOUND here), " +
      "and the Go proxy refuses github.com/maximhq/bifrost/transports; no other Go or Rust gateway is served by the registries here.",
  };
}
