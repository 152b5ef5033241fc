import { randomInt } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { Webhook } from "standardwebhooks";
import { jsonOrUndefined } from "./harness.js";
import { Receiver, type Delivery } from "./webhook-receiver.js";

/**
 * Helpers for tests that crash the service under load: a free port that stays
 * the service's port across restarts, a webhook receiver that records every
 * attempt, and a creating client that retries one request, with one
 * Idempotency-Key, until the service gives it a definitive answer.
 */

/**
 * A loopback port that is free now, for a service that must keep its port
 * across restarts. It is taken below the kernel's ephemeral range when it can
 * be, so no outgoing connection or `listen(0)` elsewhere grabs it while the
 * service is down between a kill and its restart.
 */
export async function freePort(): Promise<number> {
  let ephemeralLow = 32768;
  try {
    ephemeralLow = Number((await readFile("/proc/sys/net/ipv4/ip_local_port_range", "utf8")).trim().split(/\s+/)[0]) || ephemeralLow;
  } catch {
    // not Linux: any free port will do
  }
  for (let attempt = 0; attempt < 50 && ephemeralLow > 12_000; attempt++) {
    const port = randomInt(10_000, ephemeralLow);
    if (await listenable(port)) return port;
  }
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function listenable(port: number): Promise<boolean> {
  const server = createServer();
  const ok = await new Promise<boolean>((resolve) => {
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => resolve(true));
  });
  if (ok) await new Promise<void>((resolve) => server.close(() => resolve()));
  return ok;
}

/** A delivery as a WebhookRecorder saw it (its `webhook-id` header names the message). */
export type RecordedDelivery = Delivery;

/**
 * A webhook endpoint on 127.0.0.1 recording every POST (a Receiver). The first
 * attempt of a `webhook-id` is answered 500 with probability `failFirst` (so
 * retries are exercised), everything else 200.
 */
export class WebhookRecorder extends Receiver {
  constructor(failFirst = 0) {
    const seen = new Set<string>();
    super((delivery) => {
      const webhookId = delivery.headers["webhook-id"] ?? "";
      const first = !seen.has(webhookId);
      seen.add(webhookId);
      return first && Math.random() < failFirst ? 500 : 200;
    });
  }

  /** Throws unless the delivery carries a valid Standard Webhooks signature for `secret`. */
  static verify(secret: string, delivery: RecordedDelivery): unknown {
    return new Webhook(secret).verify(delivery.body, delivery.headers);
  }
}

export interface CreateOutcome {
  /** The definitive status: 202 or a 4xx other than 409. */
  readonly status: number;
  readonly json: any;
  readonly replayed: boolean;
  /** Attempts made, the first included. */
  readonly attempts: number;
  /** Attempts that ended in a connection error or a timeout (no HTTP answer). */
  readonly connectionErrors: number;
  /** Transient HTTP answers (409, 5xx) that were retried, by status. */
  readonly transient: Record<number, number>;
}

export interface CreateOptions {
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly idempotencyKey: string;
  readonly body: unknown;
  /** Give up (throw) at this time (ms since epoch). */
  readonly deadline: number;
  /** One attempt's bound; an attempt that takes longer counts as a connection error. */
  readonly attemptTimeoutMs?: number;
  /** Pause between attempts after a connection error or a transient answer without Retry-After. */
  readonly backoffMs?: number;
  /** Stops retrying (throws) once aborted. */
  readonly signal?: AbortSignal;
}

/** A status the client retries with the same request and key: the answer says nothing definitive yet. */
const isTransient = (status: number) => status === 409 || status === 429 || status >= 500;

/**
 * POST /api/v1/generations with one Idempotency-Key, repeated with the same
 * body and the same key on connection errors, 409, 429 and 5xx, until a 202
 * or another 4xx. Retry-After is honoured (capped at 1 s).
 */
export async function createUntilDefinitive(options: CreateOptions): Promise<CreateOutcome> {
  const payload = JSON.stringify(options.body);
  const backoffMs = options.backoffMs ?? 50;
  let attempts = 0;
  let connectionErrors = 0;
  const transient: Record<number, number> = {};
  let last = "";
  for (;;) {
    if (options.signal?.aborted) throw new Error(`gave up on Idempotency-Key ${options.idempotencyKey}: ${String(options.signal.reason)}`);
    if (Date.now() > options.deadline) {
      throw new Error(`no definitive answer for Idempotency-Key ${options.idempotencyKey} after ${attempts} attempts; last: ${last}`);
    }
    attempts++;
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${options.baseUrl}/api/v1/generations`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${options.apiKey}`,
          "content-type": "application/json",
          "idempotency-key": options.idempotencyKey,
        },
        body: payload,
        signal: AbortSignal.timeout(options.attemptTimeoutMs ?? 15_000),
      });
      text = await response.text();
    } catch (error) {
      connectionErrors++;
      last = `connection error: ${describeError(error)}`;
      await delay(backoffMs);
      continue;
    }
    const json = jsonOrUndefined(text);
    if (isTransient(response.status)) {
      transient[response.status] = (transient[response.status] ?? 0) + 1;
      last = `${response.status} ${text.slice(0, 200)}`;
      const retryAfter = Number(response.headers.get("retry-after"));
      await delay(Number.isFinite(retryAfter) && retryAfter > 0 ? Math.min(retryAfter * 1000, 1000) : backoffMs);
      continue;
    }
    return {
      status: response.status,
      json,
      replayed: response.headers.get("idempotent-replayed") === "true",
      attempts,
      connectionErrors,
      transient,
    };
  }
}

function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  const code = cause && typeof cause === "object" && "code" in cause ? String((cause as { code: unknown }).code) : "";
  return `${error.name}: ${error.message}${code ? ` (${code})` : ""}`;
}

/** Runs `task` over `items` with at most `limit` in flight; results in input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, task: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index]!, index);
    }
  });
  await Promise.all(lanes);
  return results;
}
