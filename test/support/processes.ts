import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import assert from "node:assert/strict";
import { call } from "./harness.js";
import { gatewayUrlIn, saidReady } from "./service-output.js";
import { keepLog } from "./log-capture.js";
import { spawnServiceChild } from "./service-child.js";

export interface ServiceProcess {
  readonly child: ChildProcess;
  /** Gateway origin, for processes with the api role. */
  readonly url: string;
  readonly output: () => string;
  /** Resolves with the exit code (or signal) when the process ends. */
  readonly exited: Promise<number | string>;
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/**
 * Runs the service as a real separate process (as an operator would: spawnServiceChild), waits
 * until it prints "ready", and reads its gateway URL from its output.
 */
export async function startProcess(env: Record<string, string>, readyTimeoutMs = 60_000): Promise<ServiceProcess> {
  const child = spawnServiceChild(env);
  let output = "";
  let log = "";
  child.stdout!.on("data", (chunk) => {
    output += chunk;
    log += chunk;
  });
  child.stderr!.on("data", (chunk) => (output += chunk));
  const exited = once(child, "exit").then(([code, signal]) => {
    keepLog(`process-${child.pid}`, log); // its JSON log joins the suite's secret scan
    return (code ?? signal) as number | string;
  });
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`process not ready in ${readyTimeoutMs} ms:\n${output}`)), readyTimeoutMs);
    const check = () => {
      if (saidReady(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on("data", check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`process exited (${code}) before it was ready:\n${output}`));
    });
  });
  await ready;
  const url = gatewayUrlIn(output);
  return {
    child,
    url,
    output: () => output,
    exited,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** An account with `balance` and a key for every model (with `limits`, if any) through a process's admin API; its key's secret. */
export async function customerOf(api: { url: string }, balance: string, limits: Record<string, unknown> = {}): Promise<string> {
  const account = await call(api, "POST", "/admin/v1/accounts", { admin: true, body: { name: "p", balance } });
  assert.equal(account.status, 201, account.text);
  const key = await call(api, "POST", `/admin/v1/accounts/${account.json.account_id}/keys`, { admin: true, body: { models: ["*"], ...limits } });
  assert.equal(key.status, 201, key.text);
  return key.json.api_key as string;
}
