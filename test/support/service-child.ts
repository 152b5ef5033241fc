import { spawn, type ChildProcess } from "node:child_process";
import { buildState } from "../../infra/build-state.mjs";
import { ADMIN_TOKEN, TESTS_AUTH_FAILURE_LIMIT } from "./harness.js";
import { REPO_ROOT } from "./repo.js";

const ROOT = REPO_ROOT;

/**
 * How a test starts the service as a process of its own: the compiled build
 * (`dist/`, what `npm start` runs) when it is the build of the sources as they
 * are, otherwise the sources through tsx. The same code either way; the build
 * starts in half the CPU (no TypeScript compiled at start), which counts when
 * a test starts four processes at once on two cores.
 */
function serviceArgs(): string[] {
  return buildState(ROOT) === "current" ? ["dist/src/main.js"] : ["--import", "tsx", "src/main.ts"];
}

/** Every service process this test file started and has not seen end. */
const children = new Set<ChildProcess>();

function killAll(): void {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
}

// A test file's process that ends, however it ends (its last test, a failure, or the runner's SIGTERM at the file
// timeout), takes its service processes with it: one left running loads the machine for every later test file.
process.on("exit", killAll);
for (const [signal, code] of [["SIGTERM", 143], ["SIGINT", 130]] as const) {
  process.once(signal, () => {
    killAll();
    process.exit(code);
  });
}

/**
 * Starts `src/main.ts` as a separate process (as an operator would), on
 * ephemeral loopback ports, with `env` over the tests' defaults; it is killed
 * when this test file's process ends.
 */
export function spawnServiceChild(env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, serviceArgs(), {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", METRICS_PORT: "0", ADMIN_TOKEN, AUTH_FAILURE_LIMIT: TESTS_AUTH_FAILURE_LIMIT, LOG_LEVEL: "warn", DRAIN_DELAY: "0ms", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}
