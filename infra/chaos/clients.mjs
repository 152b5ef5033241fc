// The chaos run's clients: each creates image, text and video jobs with an Idempotency-Key (retried with the same key
// until a 2xx or a final 4xx) or streams a text answer, through either API process, and records every attempt.
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { ADMIN_TOKEN } from "./service.mjs";
import { sleep } from "./processes.mjs";

const CREATIONS = [
  { kind: "image", weight: 35, body: { model: "aimodel-2.5-flash-image", prompt: "a lighthouse at dusk" } },
  { kind: "text", weight: 25, body: { model: "aimodel-3.5-flash", prompt: "Write a haiku about tides" } },
  { kind: "video", weight: 10, body: { model: "videomodel-3.1-generate-001", prompt: "waves at sunrise", resolution: "720p", duration_seconds: 4 } },
  { kind: "stream", weight: 30 },
];
const REQUEST_TIMEOUT_MS = 30_000;

/** The run's history as the clients saw it; the checker reads it (infra/chaos/checker.mjs). */
export function newHistory() {
  return { faults: [], requests: [], ops: [], credits: [], accounts: [], webhooks: [] };
}

/** One HTTP request, recorded in `history.requests`; never throws (no answer: status null). */
async function attempt(history, kind, url, init) {
  const t = Date.now();
  const record = { t, kind, method: init.method ?? "GET", status: null, retryAfter: null, code: null };
  history.requests.push(record);
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    const text = await response.text();
    record.ms = Date.now() - t;
    record.status = response.status;
    record.retryAfter = response.headers.get("retry-after");
    let json = null;
    try {
      json = JSON.parse(text);
    } catch { /* an SSE stream or an empty body */ }
    record.code = json?.error?.code ?? (typeof json?.error?.status === "string" ? json.error.status : null);
    return { status: response.status, retryAfter: record.retryAfter, json, text };
  } catch (error) {
    record.ms = Date.now() - t;
    record.code = error?.cause?.code ?? error?.name ?? "error";
    return { status: null, retryAfter: null, json: null, text: "" };
  }
}

const retryable = (status) => status === null || status >= 500 || status === 409 || status === 429;
const backoff = (answer, tries) => Math.min(5000, answer.retryAfter ? Number(answer.retryAfter) * 1000 || 1000 : 250 * 2 ** Math.min(tries, 4));

/** An admin call that must succeed (retried through faults). */
export async function admin(urls, method, path, body) {
  for (let tries = 0; ; tries++) {
    const url = urls[tries % urls.length];
    try {
      const response = await fetch(`${url}${path}`, {
        method, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      const text = await response.text();
      if (response.ok) return text ? JSON.parse(text) : null;
      if (!retryable(response.status) || tries > 40) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    } catch (error) {
      if (tries > 40) throw error;
    }
    await sleep(1000);
  }
}

/** One creation, retried with its key until a 2xx or a final answer, or until `giveUpAt`. */
async function create(history, urls, account, spec, giveUpAt, pick) {
  const key = `chaos-${randomUUID()}`;
  const op = { key, kind: spec.kind, accountId: account.accountId, jobIds: [], final: null };
  history.ops.push(op);
  const body = JSON.stringify({ ...spec.body, metadata: { chaos_key: key } });
  for (let tries = 0; Date.now() < giveUpAt; tries++) {
    const answer = await attempt(history, spec.kind, `${pick()}/api/v1/generations`, {
      method: "POST", headers: { authorization: `Bearer ${account.key}`, "content-type": "application/json", "idempotency-key": key }, body,
    });
    if (answer.status !== null && answer.status >= 200 && answer.status < 300) {
      op.jobIds.push(answer.json.job_id);
      op.final = answer.status;
      return;
    }
    if (!retryable(answer.status)) {
      op.final = answer.status;
      return;
    }
    await sleep(backoff(answer, tries));
  }
  op.final = "gave-up";
}

/** One streamed text answer (synchronous: billed for what it delivered); retried a few times on refusals. */
async function stream(history, urls, account, pick) {
  for (let tries = 0; tries < 5; tries++) {
    const answer = await attempt(history, "stream", `${pick()}/api/aimodel/v1beta/models/aimodel-3.5-flash:streamGenerateContent?alt=sse`, {
      method: "POST", headers: { "x-vendor-api-key": account.key, "content-type": "application/json", "idempotency-key": `chaos-${randomUUID()}` },
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "Write a haiku about tides" }] }] }),
    });
    if (!retryable(answer.status)) return;
    await sleep(backoff(answer, tries));
  }
}

/**
 * `count` client loops until `until()` says stop; each picks a kind by weight and an account (the tight one now and
 * then, so its balance runs out and admission is tested). Resolves once every loop's current operation has ended.
 */
export async function runClients(history, urls, accounts, count, until, drainMs) {
  let turn = 0;
  const pick = () => urls[turn++ % urls.length];
  const total = CREATIONS.reduce((s, c) => s + c.weight, 0);
  const loop = async (n) => {
    while (!until()) {
      let r = Math.random() * total;
      const spec = CREATIONS.find((c) => (r -= c.weight) < 0) ?? CREATIONS[0];
      const account = accounts[(n + turn) % 5 === 0 ? 1 : 0];
      if (spec.kind === "stream") await stream(history, urls, account, pick);
      else await create(history, urls, account, spec, Date.now() + drainMs, pick);
    }
  };
  await Promise.all(Array.from({ length: count }, (_, n) => loop(n)));
}

/** A local webhook receiver: records each delivery's headers and body, answers 200. */
export async function webhookReceiver() {
  const deliveries = [];
  const server = createServer((request, response) => {
    let body = "";
    request.setEncoding("utf8");
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      const headers = {};
      for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) headers[name] = String(request.headers[name] ?? "");
      deliveries.push({ headers, body, at: Date.now() });
      response.writeHead(200).end();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/hook`, deliveries, close: () => server.close() };
}
