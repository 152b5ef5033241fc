// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "../support/eventually.js";
import { runTool } from "../support/go-tools.js";
import { repoPath } from "../support/repo.js";
import { gatewayUrlIn } from "../support/service-output.js";

/**
 * The production image (issue 40), checked without a Docker engine: the Dockerfile's stages, user, health check and
 * what its final stage copies; then the final stage's own commands run for real: its production dependencies
 * installed with the deps stage's npm command into a directory of their own (no devDependency there; install
 * scripts skipped, the native SQLite addon copied from this checkout's build of the same version), the
 * compiled service beside them, started with the image's CMD and environment, until GET /readyz answers 200 and the
 * HEALTHCHECK's command exits 0. A production import of a devDependency fails here.
 */

interface Stage {
  readonly name: string;
  readonly from: string;
  /** Each instruction of the stage, continuation lines joined: [keyword, rest]. */
  readonly instructions: readonly (readonly [string, string])[];
}

function stagesOf(dockerfile: string): Stage[] {
  const lines = dockerfile.replace(/\\\n\s*/g, " ").split("\n").map((line) => line.trim()).filter((line) => line && !line.startsWith("#"));
  const stages: { name: string; from: string; instructions: [string, string][] }[] = [];
  for (const line of lines) {
    const [keyword = "", ...rest] = line.split(/\s+/);
    const args = rest.join(" ");
    if (keyword.toUpperCase() === "FROM") {
      const match = /^(\S+)\s+AS\s+(\S+)$/i.exec(args);
      assert.ok(match, `every stage is named: FROM ${args}`);
      stages.push({ from: match[1]!, name: match[2]!, instructions: [] });
    } else {
      assert.ok(stages.length > 0, `${line} comes after a FROM`);
      stages.at(-1)!.instructions.push([keyword.toUpperCase(), args]);
    }
  }
  return stages;
}

const DOCKERFILE = readFileSync(repoPath("Dockerfile"), "utf8");
const STAGES = stagesOf(DOCKERFILE);
const stage = (name: string) => STAGES.find((s) => s.name === name) ?? assert.fail(`no stage ${name}`);
const args = (s: Stage, keyword: string) => s.instructions.filter(([k]) => k === keyword).map(([, rest]) => rest);
const FINAL = STAGES.at(-1)!;

describe("the Dockerfile, read", () => {
  it("when its stages are listed, then deps, build and final, in that order, each from Node 20's slim image", () => {
    assert.deepEqual(STAGES.map((s) => s.name), ["deps", "build", "final"]);
    for (const s of STAGES) assert.equal(s.from, "node:20-bookworm-slim", s.name);
    assert.ok(args(stage("build"), "RUN").some((run) => /npm run build\b/.test(run) && /npm run build:panel/.test(run)), "the build stage compiles the service and the panel");
    assert.ok(args(stage("deps"), "RUN").some((run) => /\bnpm ci --omit=dev\b/.test(run)), "the deps stage installs production dependencies only");
  });

  it("when the final stage is read, then it runs as the unprivileged node user, checks /readyz, and copies no dev dependency and no source", () => {
    assert.deepEqual(args(FINAL, "USER"), ["node"]);
    const healthcheck = args(FINAL, "HEALTHCHECK");
    assert.equal(healthcheck.length, 1);
    assert.match(healthcheck[0]!, /CMD \["node", "healthcheck.mjs"\]/);
    assert.match(readFileSync(repoPath("deploy", "docker", "healthcheck.mjs"), "utf8"), /\/readyz/);
    const copies = args(FINAL, "COPY");
    assert.ok(copies.includes("--from=deps /app/node_modules ./node_modules"), "node_modules come from the production install");
    assert.deepEqual(copies.filter((c) => c.startsWith("--from=build")), ["--from=build /src/dist ./dist", "--from=build /src/panel/dist ./panel/dist"]);
    assert.ok(!copies.some((c) => /^\.\s|node_modules/.test(c) && !c.startsWith("--from=deps")), `no copy of the context or of the build's node_modules: ${copies.join("; ")}`);
    assert.deepEqual(args(FINAL, "RUN").filter((run) => /npm (ci|install)/.test(run)), [], "nothing installed in the final stage");
    assert.ok(args(FINAL, "ENV").some((env) => /ROLE=all/.test(env)), "ROLE chooses the roles, all by default");
  });

  it("when .dockerignore and docker-compose.yml are read, then installed trees and local state stay out of the context, and compose builds this Dockerfile", () => {
    const ignored = readFileSync(repoPath(".dockerignore"), "utf8").split("\n").map((line) => line.trim());
    for (const path of ["node_modules", ".git", ".infra", "data", "dist", ".test-build"]) assert.ok(ignored.includes(path), path);
    const compose = readFileSync(repoPath("docker-compose.yml"), "utf8");
    assert.match(compose, /^ {6}dockerfile: Dockerfile\b/m);
    assert.doesNotMatch(compose, /dockerfile_inline/);
  });
});

describe("the Dockerfile's final stage, run without Docker", () => {
  const root = mkdtempSync(join(tmpdir(), "image-final-stage-"));
  const app = join(root, "app");
  let child: ChildProcess | undefined;
  let output = "";

  before(() => {
    cpSync(repoPath("package.json"), join(app, "package.json"));
    cpSync(repoPath("package-lock.json"), join(app, "package-lock.json"));
  });
  after(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await once(child, "exit");
    }
    rmSync(root, { recursive: true, force: true });
  });

  it("when the deps stage's npm commands run on the lock file, then the production dependencies are there and no devDependency", async () => {
    const commands = args(stage("deps"), "RUN").filter((run) => run.startsWith("npm "));
    assert.equal(commands.length, 1, `the deps stage's npm command: ${commands.join("; ")}`);
    // Install scripts skipped: better-sqlite3's native build (minutes of compiling on this host) is taken from this
    // checkout's install of the same version for the same Node, which is what the image's compile makes.
    const run = await runTool("bash", ["-euo", "pipefail", "-c", commands[0]!], {
      cwd: app, timeoutMs: 240_000, env: { ...process.env, npm_config_prefer_offline: "true", npm_config_ignore_scripts: "true" },
    });
    assert.equal(run.code, 0, run.stderr);
    cpSync(repoPath("node_modules", "better-sqlite3", "build", "Release", "better_sqlite3.node"),
      join(app, "node_modules", "better-sqlite3", "build", "Release", "better_sqlite3.node"));
    const lock = JSON.parse(readFileSync(join(app, "package-lock.json"), "utf8")) as { packages: Record<string, { dev?: boolean }> };
    const devOnly = Object.keys(lock.packages).filter((path) => path.startsWith("node_modules/") && lock.packages[path]!.dev);
    assert.ok(devOnly.length > 50, `the lock file's dev-only packages (${devOnly.length})`);
    assert.deepEqual(devOnly.filter((path) => existsSync(join(app, path))), [], "dev-only packages installed");
    for (const name of ["fastify", "better-sqlite3", "cassandra-driver", "kafkajs"]) assert.ok(existsSync(join(app, "node_modules", name)), name);
  });

  it("when the compiled service starts there with the image's CMD and environment, then GET /readyz answers 200 and the HEALTHCHECK's command exits 0", async () => {
    // The compiled service as the suite's build made it (the same tsc of src/ and gen/, with their assets), and the panel.
    cpSync(repoPath(".test-build", "src"), join(app, "dist", "src"), { recursive: true });
    cpSync(repoPath(".test-build", "gen"), join(app, "dist", "gen"), { recursive: true });
    if (existsSync(repoPath("panel", "dist"))) cpSync(repoPath("panel", "dist"), join(app, "panel", "dist"), { recursive: true });
    cpSync(repoPath("deploy", "docker", "healthcheck.mjs"), join(app, "healthcheck.mjs"));
    const env: Record<string, string> = { PATH: process.env.PATH ?? "" };
    for (const line of args(FINAL, "ENV")) {
      for (const [, name, value] of line.matchAll(/(\w+)=(\S+)/g)) env[name!] = value!;
    }
    Object.assign(env, { HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", DATA_DIR: join(root, "data"), ADMIN_TOKEN: "image-test-admin-token-0123456789abcdef" });
    const cmd = JSON.parse(args(FINAL, "CMD")[0]!) as string[];
    assert.equal(cmd[0], "node");
    child = spawn(process.execPath, cmd.slice(1), { cwd: app, env, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout!.on("data", (chunk) => (output += chunk));
    child.stderr!.on("data", (chunk) => (output += chunk));
    const exited = once(child, "exit");
    const url = await eventually(() => {
      if (child!.exitCode !== null) throw new Error(`the service exited (${child!.exitCode}):\n${output}`);
      return gatewayUrlIn(output);
    }, Boolean, { timeoutMs: 60_000, what: "the service's ready line" });
    const ready = await eventually(() => fetch(`${url}/readyz`).then((r) => r.status), (status) => status === 200, { timeoutMs: 30_000, what: "/readyz 200" });
    assert.equal(ready, 200);
    const check = await runTool(process.execPath, ["healthcheck.mjs"], { cwd: app, env: { ...env, PORT: new URL(url).port } });
    assert.equal(check.code, 0, check.stderr);
    const refused = await runTool(process.execPath, ["healthcheck.mjs"], { cwd: app, env: { ...env, ROLE: "worker", METRICS_PORT: "1" } });
    assert.equal(refused.code, 1, "a process that does not answer is unhealthy");
    child.kill("SIGTERM");
    assert.deepEqual(await exited, [0, null]);
  });
});
