// backends: embedded, real
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomInt, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { BACKEND, call, eventually, pico, TERMINAL } from "../support/harness.js";
import { probePng } from "../support/media-probe.js";
import { startProcess, type ServiceProcess } from "../support/processes.js";
import { assertLedgerReconciles } from "../support/ledger-helpers.js";
import {
  createUntilDefinitive, freePort, mapLimit, WebhookRecorder, type CreateOutcome, type RecordedDelivery,
} from "../support/crash-clients.js";

/**
 * The embedded default (no Cassandra, no Kafka) keeps everything in DATA_DIR:
 * one process killed with SIGKILL at random moments while clients create jobs,
 * and restarted on the same DATA_DIR, loses no job, no money and no webhook,
 * and never creates a job twice for one Idempotency-Key.
 */
const skip = BACKEND === "real" && "about the embedded default; the real backend's crashes are in multi-process.test.ts";

/** SIGKILLs in one run (the issue asks for at least 20); CRASH_KILLS overrides it when debugging the test itself. */
const KILLS = Number(process.env.CRASH_KILLS ?? 22);
const CLIENTS = 4;
const CREDIT = "100.00";
const BUDGET_MS = 240_000;
const IMAGE_MODEL = "aimodel-2.5-flash-image";
const TEXT_MODEL = "aimodel-3.5-flash";
const VIDEO_MODEL = "videomodel-3.1-generate-001";

type Kind = "image" | "text" | "video";

interface Request {
  readonly client: number;
  readonly key: string;
  readonly kind: Kind;
  readonly body: Record<string, unknown>;
  readonly outcome: CreateOutcome;
  /** Process generation (restarts so far) when the definitive answer came. */
  readonly generation: number;
}

const secs = (ms: number) => (ms / 1000).toFixed(1);

function pickKind(): Kind {
  const roll = randomInt(100);
  return roll < 55 ? "image" : roll < 92 ? "text" : "video";
}

function bodyFor(kind: Kind, key: string, client: number): Record<string, unknown> {
  const metadata = { key, client };
  switch (kind) {
    case "image":
      return { model: IMAGE_MODEL, prompt: `a lighthouse, take ${key}`, aspect_ratio: "16:9", metadata };
    case "text":
      return { model: TEXT_MODEL, prompt: `Write one line about tides (${key})`, metadata };
    case "video":
      return { model: VIDEO_MODEL, prompt: `waves at dusk ${key}`, resolution: "720p", duration_seconds: 4, aspect_ratio: "16:9", metadata };
  }
}

describe("the embedded default under SIGKILL", { skip }, () => {
  let service: ServiceProcess | undefined;
  let dataDir = "";
  const recorder = new WebhookRecorder(0.1);
  const giveUp = new AbortController();

  after(async () => {
    giveUp.abort(new Error("test over"));
    await service?.stop("SIGKILL").catch(() => {});
    await recorder.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it(`${KILLS} SIGKILLs during image, text and video creation with Idempotency-Keys: every job finishes, charged once, one webhook id each`, { timeout: BUDGET_MS }, async (t) => {
    const startedAt = Date.now();
    const creationDeadline = startedAt + BUDGET_MS - 90_000;
    dataDir = await mkdtemp(join(tmpdir(), "gen-crash-embedded-"));
    await recorder.start();
    const port = await freePort();
    let grpcPort = await freePort();
    while (grpcPort === port) grpcPort = await freePort();
    const env: Record<string, string> = {
      DATA_DIR: dataDir,
      PORT: String(port),
      GRPC_PORT: String(grpcPort),
      ALLOW_PRIVATE_URLS: "true",
      SIMULATED_LATENCY_MS: "100",
      WEBHOOK_RETRY_SCHEDULE: "100ms,200ms,400ms,800ms,1s,2s,5s",
      REAPER_INTERVAL: "200ms",
      JOB_LEASE: "2s",
      // An acceptance that died before storing its job is undone after this (the default is 60 s).
      REQUEUE_AFTER: "3s",
      SHUTDOWN_GRACE: "200ms",
      LOG_LEVEL: "warn",
    };
    const baseUrl = `http://127.0.0.1:${port}`;
    const api = { url: baseUrl };
    const restartMs: number[] = [];
    const requests: Request[] = [];
    const start = async () => {
      const before = Date.now();
      service = await startProcess(env);
      restartMs.push(Date.now() - before);
      assert.equal(service.url, baseUrl, "the gateway keeps its port across restarts");
    };
    await start();

    // --- set-up: an account with a known credit, a key for every model, the account's webhook ---
    const models = await call(api, "GET", "/api/v1/models");
    assert.equal(models.status, 200, models.text);
    const kindOf = new Map<string, string>((models.json.models as { id: string; kind: string }[]).map((m) => [m.id, m.kind]));
    for (const [model, kind] of [[IMAGE_MODEL, "image"], [TEXT_MODEL, "text"], [VIDEO_MODEL, "video"]] as const) {
      assert.equal(kindOf.get(model), kind, `${model} listed as ${kind}: ${models.text.slice(0, 500)}`);
    }
    const account = await call(api, "POST", "/admin/v1/accounts", { admin: true, body: { name: "crash", balance: CREDIT } });
    assert.equal(account.status, 201, account.text);
    const accountId = account.json.account_id as string;
    const key = await call(api, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { models: ["*"] } });
    assert.equal(key.status, 201, key.text);
    const apiKey = key.json.api_key as string;
    const hook = await call(api, "PUT", `/admin/v1/accounts/${accountId}/webhook`, { admin: true, body: { url: recorder.url } });
    assert.equal(hook.status, 200, hook.text);
    const secret = hook.json.secret as string;
    assert.match(secret, /^whsec_/);

    // --- clients: create, retry the same request with the same key until a definitive answer ---
    const unexpected: string[] = [];
    let generation = 0;
    let creating = true;
    const client = async (n: number) => {
      for (let seq = 0; creating && unexpected.length === 0; seq++) {
        const kind = pickKind();
        const idempotencyKey = `c${n}-${seq}-${randomUUID()}`;
        const body = bodyFor(kind, idempotencyKey, n);
        const outcome = await createUntilDefinitive({
          baseUrl, apiKey, idempotencyKey, body, deadline: creationDeadline, signal: giveUp.signal,
        });
        requests.push({ client: n, key: idempotencyKey, kind, body, outcome, generation });
        if (outcome.status !== 202 && outcome.status !== 402) {
          unexpected.push(
            `${kind} with Idempotency-Key ${idempotencyKey} answered ${outcome.status} after ${outcome.attempts} attempts ` +
              `(${outcome.connectionErrors} connection errors, process restarted ${generation} times): ${JSON.stringify(outcome.json)}`,
          );
        }
        await delay(randomInt(60, 250)); // a client's pace, not a wait for a condition
      }
    };
    const clients = Array.from({ length: CLIENTS }, (_, n) => client(n));

    // --- the killer: random moments of activity, SIGKILL, restart on the same DATA_DIR ---
    let kills = 0;
    let killerError: unknown;
    try {
      while (kills < KILLS && unexpected.length === 0) {
        await delay(randomInt(100, 801));
        const exit = await service!.stop("SIGKILL");
        assert.equal(exit, "SIGKILL", `the process died on its own before the kill (${exit}):\n${service!.output()}`);
        kills++;
        generation++;
        await start();
      }
      if (KILLS === 0) await delay(2000); // CRASH_KILLS=0: the test's own mechanics, on one uninterrupted process
    } catch (error) {
      killerError = error;
      giveUp.abort(error);
    } finally {
      creating = false;
    }
    const clientResults = await Promise.allSettled(clients);
    if (killerError) throw killerError;
    for (const result of clientResults) if (result.status === "rejected") throw result.reason;
    assert.deepEqual(unexpected, [], "every creation ends in 202 or 402");
    assert.equal(kills, KILLS);
    const creationEndedAt = Date.now();

    // --- what the clients were told ---
    const accepted = requests.filter((r) => r.outcome.status === 202);
    const refused = requests.filter((r) => r.outcome.status === 402);
    // Acceptances whose 202 was lost to a kill: the retry was answered from the stored key.
    const lostAnswers = accepted.filter((r) => r.outcome.replayed).length;
    assert.ok(accepted.length > 0, "some jobs were accepted");
    for (const r of accepted) {
      assert.equal(r.outcome.json?.status, "queued", `202 body of ${r.key}: ${JSON.stringify(r.outcome.json)}`);
      assert.match(r.outcome.json?.job_id ?? "", /^[0-9a-f-]{36}$/);
    }
    const jobIdOf = new Map(accepted.map((r) => [r.key, r.outcome.json.job_id as string]));
    const requestOf = new Map(accepted.map((r) => [r.outcome.json.job_id as string, r]));
    assert.equal(requestOf.size, accepted.length, "no two Idempotency-Keys were answered with the same job");

    // --- every accepted job reaches done or failed ---
    // The webhooks say when jobs finish without loading the service (polling hundreds of
    // jobs would compete with the work it waits for); then every job is read once.
    const jobIds = accepted.map((r) => jobIdOf.get(r.key)!);
    const unannounced = () => {
      const announced = new Set(recorder.deliveries.filter((d) => d.answered === 200).map((d) => String(d.json?.job_id)));
      return jobIds.filter((id) => !announced.has(id));
    };
    const webhooksDone = await eventually(async () => unannounced(), (missing) => missing.length === 0, {
      timeoutMs: Math.max(10_000, startedAt + BUDGET_MS - 60_000 - Date.now()), intervalMs: 200, what: "a webhook for every job",
    }).then(() => true, () => false);
    const jobs = new Map<string, any>();
    const read = async (ids: readonly string[]) => {
      const lost: string[] = [];
      await mapLimit(ids, 8, async (id) => {
        const response = await call(api, "GET", `/api/v1/jobs/${id}`, { key: apiKey });
        if (response.status === 200) jobs.set(id, response.json);
        else lost.push(`${id} (${requestOf.get(id)!.kind}, key ${requestOf.get(id)!.key}): GET answered ${response.status} ${response.text}`);
      });
      assert.deepEqual(lost, [], "every job answered 202 still exists");
      return ids.filter((id) => !TERMINAL.has(jobs.get(id)?.status));
    };
    // A job's webhook may go out a moment before its view shows it finished: a short poll covers that.
    const open = await eventually(() => read(jobIds.filter((id) => !TERMINAL.has(jobs.get(id)?.status))), (ids) => ids.length === 0, {
      timeoutMs: webhooksDone ? 10_000 : 1000, intervalMs: 250, what: "every job done or failed",
    }).catch(() => jobIds.filter((id) => !TERMINAL.has(jobs.get(id)?.status)));
    assert.deepEqual(
      open.map((id) => `${id} ${requestOf.get(id)!.kind} ${JSON.stringify(jobs.get(id))} (answered 202 after ${requestOf.get(id)!.generation} restarts)`),
      [],
      `every job answered 202 is done or failed (${open.length} of ${jobIds.length} are not)`,
    );
    const jobsFinishedAt = Date.now();

    // --- each done job charged once, failed jobs charged nothing, the balance exact to the last digit ---
    let charged = 0n;
    const failures = new Map<string, number>();
    for (const r of accepted) {
      const id = jobIdOf.get(r.key)!;
      const job = jobs.get(id);
      assert.equal(job.model, r.body.model, `job ${id} is the model that was asked for`);
      const usage = { charged: pico(job.usage.charged), reserved: pico(job.usage.reserved) };
      if (job.status === "done") {
        assert.ok(usage.charged > 0n, `done job ${id} (${r.kind}) was charged: ${JSON.stringify(job.usage)}`);
        if (r.kind === "text") {
          assert.ok(usage.charged <= usage.reserved, `text job ${id} charged within its reservation: ${JSON.stringify(job.usage)}`);
        } else {
          assert.equal(usage.charged, usage.reserved, `${r.kind} job ${id} charged its price exactly once: ${JSON.stringify(job.usage)}`);
        }
      } else {
        assert.equal(usage.charged, 0n, `failed job ${id} charged nothing: ${JSON.stringify(job)}`);
        failures.set(job.error, (failures.get(job.error) ?? 0) + 1);
      }
      charged += usage.charged;
    }
    const balance = await call(api, "GET", "/api/v1/balance", { key: apiKey });
    assert.equal(balance.status, 200, balance.text);
    assert.equal(
      pico(CREDIT) - pico(balance.json.balance), charged,
      `credits − balance = Σ charged of the accepted jobs (${CREDIT} − ${balance.json.balance} vs ${charged} pico); a difference is money taken for jobs no client was told about, or lost`,
    );
    assert.equal(pico(balance.json.reserved), 0n, `nothing stays reserved: ${balance.text}`);
    assert.equal(pico(balance.json.available), pico(balance.json.balance), `available = balance: ${balance.text}`);
    const adminBalance = await call(api, "GET", `/admin/v1/accounts/${accountId}/balance`, { admin: true });
    assert.equal(adminBalance.status, 200, adminBalance.text);
    assert.equal(pico(adminBalance.json.balance), pico(balance.json.balance), `admin view agrees: ${adminBalance.text}`);
    assert.equal(pico(adminBalance.json.reserved), 0n, `admin view agrees: ${adminBalance.text}`);
    // The statement survived every SIGKILL with its movements: it reconciles to the cent, each job's hold ended once.
    const entries = await assertLedgerReconciles(api, { accountId });
    assert.equal(entries.filter((e) => e.type === "charge").reduce((sum, e) => sum - pico(e.amount), 0n), charged);

    // --- no key created two jobs: replaying every accepted request now gives back its one job ---
    const replays = await mapLimit(accepted, 8, (r) =>
      createUntilDefinitive({ baseUrl, apiKey, idempotencyKey: r.key, body: r.body, deadline: Date.now() + 30_000, signal: giveUp.signal }),
    );
    accepted.forEach((r, i) => {
      const replay = replays[i]!;
      assert.equal(replay.status, 202, `replay of ${r.key}: ${JSON.stringify(replay.json)}`);
      assert.equal(replay.json.job_id, jobIdOf.get(r.key), `Idempotency-Key ${r.key} stands for one job`);
      assert.ok(replay.replayed, `replay of ${r.key} is marked Idempotent-Replayed`);
    });
    const afterReplays = await call(api, "GET", "/api/v1/balance", { key: apiKey });
    assert.equal(afterReplays.json.balance, balance.json.balance, "replays charge nothing");
    assert.equal(pico(afterReplays.json.reserved), 0n, "replays reserve nothing");
    const replayedAt = Date.now();

    // --- each finished job produced one webhook (retries keep its webhook-id) ---
    await eventually(async () => unannounced(), (missing) => missing.length === 0, {
      timeoutMs: webhooksDone ? 1000 : 5000, intervalMs: 100, what: "a webhook accepted for every finished job",
    });
    // Nothing more is on its way: a second delivery of a job would show up within this quiet time.
    await eventually(
      async () => Date.now() - Math.max(...recorder.deliveries.map((d) => d.at)),
      (idle) => idle >= 1500,
      { timeoutMs: 20_000, intervalMs: 50, what: "1.5 s without webhook deliveries" },
    );
    const webhooksAt = Date.now();
    const byJob = new Map<string, RecordedDelivery[]>();
    for (const d of recorder.deliveries) {
      const id = String(d.json?.job_id);
      byJob.set(id, [...(byJob.get(id) ?? []), d]);
    }
    const strangers = [...byJob.keys()].filter((id) => !requestOf.has(id));
    assert.deepEqual(strangers, [], "no webhook for a job no client was answered 202 for");
    const webhookIds = new Map<string, string>();
    for (const r of accepted) {
      const id = jobIdOf.get(r.key)!;
      const deliveries = byJob.get(id) ?? [];
      const ids = new Set(deliveries.map((d) => d.headers["webhook-id"]));
      assert.equal(ids.size, 1, `job ${id}: every delivery carries one webhook-id, got ${JSON.stringify([...ids])}`);
      const webhookId = [...ids][0]!;
      assert.match(webhookId, /\S/);
      assert.equal(webhookIds.get(webhookId), undefined, `webhook-id ${webhookId} belongs to one job`);
      webhookIds.set(webhookId, id);
      const job = jobs.get(id);
      for (const d of deliveries) {
        assert.doesNotThrow(() => WebhookRecorder.verify(secret, d), `delivery for ${id} is signed with the account's secret`);
        assert.equal(d.json.status, job.status === "done" ? "success" : "failed", `webhook status of ${id}`);
        assert.deepEqual(d.json.metadata, r.body.metadata, `webhook metadata of ${id}`);
      }
    }

    // --- a result link still downloads after the last restart (same port, persisted signing key) ---
    const firstImage = accepted.find((r) => r.kind === "image" && jobs.get(jobIdOf.get(r.key)!)?.status === "done");
    assert.ok(firstImage, "at least one image job is done");
    const view = await call(api, "GET", `/api/v1/jobs/${jobIdOf.get(firstImage.key)}`, { key: apiKey });
    const imageUrl = view.json?.result?.image_url as string;
    assert.ok(imageUrl?.startsWith(baseUrl), `result.image_url on the service's origin: ${imageUrl}`);
    const download = await fetch(imageUrl);
    assert.equal(download.status, 200, `GET ${imageUrl}`);
    const png = probePng(new Uint8Array(await download.arrayBuffer()));
    assert.ok(png.width > 0 && png.height > 0);

    const done = accepted.filter((r) => jobs.get(jobIdOf.get(r.key)!)?.status === "done").length;
    const attempts = requests.reduce((n, r) => n + r.outcome.attempts, 0);
    const connectionErrors = requests.reduce((n, r) => n + r.outcome.connectionErrors, 0);
    const transient: Record<number, number> = {};
    for (const r of requests) for (const [status, n] of Object.entries(r.outcome.transient)) transient[Number(status)] = (transient[Number(status)] ?? 0) + n;
    const perKind = (kind: Kind) => accepted.filter((r) => r.kind === kind).length;
    const sorted = [...restartMs].sort((a, b) => a - b);
    t.diagnostic(
      `kills ${kills}; requests ${requests.length} (${attempts} attempts, ${connectionErrors} connection errors, transient ${JSON.stringify(transient)}); ` +
        `jobs ${accepted.length} (${lostAnswers} first answered by a replay; image ${perKind("image")}, text ${perKind("text")}, video ${perKind("video")}), refused 402 ${refused.length}; ` +
        `done ${done}, failed ${accepted.length - done}${failures.size ? ` ${JSON.stringify(Object.fromEntries(failures))}` : ""}; ` +
        `balance ${balance.json.balance} of ${CREDIT}; deliveries ${recorder.deliveries.length} ` +
        `(${recorder.deliveries.filter((d) => d.answered !== 200).length} answered 500, ${recorder.deliveries.filter((d) => d.answered === 200).length - accepted.length} duplicates accepted); ` +
        `restart median ${sorted[sorted.length >> 1]} ms, max ${sorted[sorted.length - 1]} ms; seconds: creation ${secs(creationEndedAt - startedAt)}, jobs finished +${secs(jobsFinishedAt - creationEndedAt)}, ` +
        `replays +${secs(replayedAt - jobsFinishedAt)}, webhooks +${secs(webhooksAt - replayedAt)}, total ${secs(Date.now() - startedAt)}`,
    );
  });
});
