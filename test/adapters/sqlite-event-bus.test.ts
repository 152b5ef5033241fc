// backends: embedded
import { after, afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { openSqliteStores, type SqliteStores } from "../../src/adapters/sqlite/sqlite-stores.js";
import { TOPICS } from "../../src/ports/event-bus.js";
import { eventually } from "../support/eventually.js";
import { REPO_ROOT } from "../support/repo.js";

const REPO = REPO_ROOT;
const directories: string[] = [];
const opened: SqliteStores[] = [];

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "sqlite-bus-"));
  directories.push(dir);
  return dir;
}

async function open(dataDir: string, redeliveryDelayMs = 50, maxInFlightPerGroup?: number): Promise<SqliteStores> {
  const stores = await openSqliteStores({ dataDir, synchronous: "normal", defaultPrices: new Map(), redeliveryDelayMs, maxInFlightPerGroup });
  opened.push(stores);
  return stores;
}

afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
});
after(() => {
  for (const dir of directories) rmSync(dir, { recursive: true, force: true });
});

function recorder<T>() {
  const seen: { event: T; at: number }[] = [];
  return { seen, handler: async (event: T) => void seen.push({ event, at: Date.now() }) };
}

const pendingRows = (stores: SqliteStores) => stores.database.db.prepare("SELECT count(*) FROM bus_events").pluck().get() as number;

describe("SqliteEventBus", () => {
  it("when an event is published, then every group of its topic gets it once and its rows are gone", async () => {
    const stores = await open(freshDir());
    const a = recorder<{ jobId: string }>();
    const b = recorder<{ jobId: string }>();
    await stores.bus.subscribe(TOPICS.jobFinished, "group-a", a.handler);
    await stores.bus.subscribe(TOPICS.jobFinished, "group-b", b.handler);
    await stores.bus.publish(TOPICS.jobFinished, "j1", { jobId: "j1" });
    await stores.bus.publish(TOPICS.generationRequested, "j1", { jobId: "j1" }); // no group: dropped
    await eventually(() => a.seen.length === 1 && b.seen.length === 1, Boolean, { what: "both groups", timeoutMs: 5_000 });
    await eventually(() => pendingRows(stores) === 0, Boolean, { what: "rows deleted", timeoutMs: 5_000 });
    assert.deepEqual(a.seen[0]!.event, { jobId: "j1" });
    assert.deepEqual(b.seen[0]!.event, { jobId: "j1" });
    await assert.rejects(stores.bus.subscribe(TOPICS.jobFinished, "group-a", a.handler), /already subscribed/);
  });

  it("when a handler throws, then it gets the event again after the redelivery delay until it succeeds", async () => {
    const stores = await open(freshDir(), 100);
    const calls: number[] = [];
    await stores.bus.subscribe(TOPICS.webhookDelivery, "g", async () => {
      calls.push(Date.now());
      if (calls.length < 3) throw new Error(`failure ${calls.length}`);
    });
    await stores.bus.publish(TOPICS.webhookDelivery, "j", { jobId: "j", attempt: 0 });
    await eventually(() => calls.length === 3, Boolean, { what: "three attempts", timeoutMs: 5_000 });
    await eventually(() => pendingRows(stores) === 0, Boolean, { what: "row deleted after the success", timeoutMs: 5_000 });
    assert.ok(calls[1]! - calls[0]! >= 95, `redelivered after ${calls[1]! - calls[0]!} ms`);
    assert.ok(calls[2]! - calls[1]! >= 95, `redelivered after ${calls[2]! - calls[1]!} ms`);
  });

  it("when an event is published with a delay, then it is not delivered before it is due", async () => {
    const stores = await open(freshDir());
    const r = recorder<{ n: number }>();
    await stores.bus.subscribe(TOPICS.webhookDelivery, "g", r.handler);
    const publishedAt = Date.now();
    await stores.bus.publish(TOPICS.webhookDelivery, "k", { n: 1 }, { delayMs: 300 });
    await stores.bus.publish(TOPICS.webhookDelivery, "k", { n: 2 });
    await eventually(() => r.seen.length === 2, Boolean, { what: "both events", timeoutMs: 5_000 });
    assert.deepEqual(r.seen.map((s) => s.event.n), [2, 1]);
    assert.ok(r.seen[1]!.at - publishedAt >= 300, `delivered after ${r.seen[1]!.at - publishedAt} ms`);
  });

  it("when a delayed event is pending at close, then after a reopen it is delivered when due, not before", async () => {
    const dir = freshDir();
    const first = await open(dir);
    await first.bus.subscribe(TOPICS.webhookDelivery, "webhooks", async () => assert.fail("delivered before it was due"));
    const publishedAt = Date.now();
    await first.bus.publish(TOPICS.webhookDelivery, "j", { jobId: "j", attempt: 1 }, { delayMs: 400 });
    await first.close();

    const second = await open(dir);
    const r = recorder<{ jobId: string; attempt: number }>();
    await second.bus.subscribe(TOPICS.webhookDelivery, "webhooks", r.handler);
    await eventually(() => r.seen.length === 1, Boolean, { what: "the delayed event after reopen", timeoutMs: 5_000 });
    assert.deepEqual(r.seen[0]!.event, { jobId: "j", attempt: 1 });
    assert.ok(r.seen[0]!.at - publishedAt >= 400, `delivered after ${r.seen[0]!.at - publishedAt} ms`);
    await eventually(() => pendingRows(second) === 0, Boolean, { what: "row deleted", timeoutMs: 5_000 });
  });

  it("when a group was registered before a restart, then a publish made before it subscribes again still reaches it", async () => {
    const dir = freshDir();
    const first = await open(dir);
    const subscription = await first.bus.subscribe(TOPICS.jobFinished, "webhook-dispatchers", async () => {});
    await subscription.close();
    await first.close();

    const second = await open(dir);
    await second.bus.publish(TOPICS.jobFinished, "j7", { jobId: "j7" }); // nobody subscribed in this run yet
    await second.close();

    const third = await open(dir);
    const r = recorder<{ jobId: string }>();
    await third.bus.subscribe(TOPICS.jobFinished, "webhook-dispatchers", r.handler);
    await eventually(() => r.seen.length === 1, Boolean, { what: "the event published before re-subscribing", timeoutMs: 5_000 });
    assert.deepEqual(r.seen[0]!.event, { jobId: "j7" });
  });

  it("when more events are due than a group's window, then at most the window's handlers run at once and the rest wait as rows, delivered once each in due order", async () => {
    const stores = await open(freshDir(), 50, 4);
    const gates: (() => void)[] = [];
    const started: number[] = [];
    let runningNow = 0;
    let most = 0;
    await stores.bus.subscribe<{ n: number }>(TOPICS.generationRequested, "workers", async ({ n }) => {
      started.push(n);
      most = Math.max(most, ++runningNow);
      await new Promise<void>((release) => gates.push(release));
      runningNow--;
    });
    for (let n = 0; n < 40; n++) await stores.bus.publish(TOPICS.generationRequested, `j${n}`, { n });
    await eventually(() => gates.length === 4, Boolean, { what: "the window to fill", timeoutMs: 5_000 });
    // The rest are rows only: the window stays full until a handler ends.
    await new Promise((settle) => setImmediate(settle));
    assert.equal(started.length, 4);
    assert.equal(pendingRows(stores), 40);
    while (started.length < 40 || gates.length > 0) {
      gates.shift()?.();
      await eventually(() => gates.length > 0 || started.length === 40, Boolean, { what: "the next handler", timeoutMs: 5_000 });
    }
    await eventually(() => pendingRows(stores) === 0, Boolean, { what: "every row delivered", timeoutMs: 5_000 });
    assert.equal(most, 4);
    assert.deepEqual(started, Array.from({ length: 40 }, (_, n) => n));
  });

  it("when a window is full of handlers that fail, then a delayed event due meanwhile waits for room and is still delivered", async () => {
    const stores = await open(freshDir(), 30, 2);
    const seen: string[] = [];
    let failures = 0;
    await stores.bus.subscribe<{ id: string }>(TOPICS.generationRequested, "workers", async ({ id }) => {
      if (id.startsWith("flaky") && failures++ < 6) throw new Error("not yet");
      seen.push(id);
    });
    await stores.bus.publish(TOPICS.generationRequested, "f1", { id: "flaky-1" });
    await stores.bus.publish(TOPICS.generationRequested, "f2", { id: "flaky-2" });
    await stores.bus.publish(TOPICS.generationRequested, "late", { id: "late" }, { delayMs: 40 });
    await eventually(() => seen.length === 3, Boolean, { what: "all three events", timeoutMs: 5_000 });
    assert.deepEqual([...seen].sort(), ["flaky-1", "flaky-2", "late"]);
    assert.equal(pendingRows(stores), 0);
  });

  it("when close() is called while a handler runs, then it waits for the handler and its row is settled", async () => {
    const stores = await open(freshDir());
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started = false;
    let finished = false;
    await stores.bus.subscribe(TOPICS.generationRequested, "workers", async () => {
      started = true;
      await gate;
      finished = true;
    });
    await stores.bus.publish(TOPICS.generationRequested, "j", { jobId: "j" });
    await eventually(() => started, Boolean, { what: "handler started", timeoutMs: 5_000 });
    const closing = stores.bus.close();
    release();
    await closing;
    assert.equal(finished, true);
    assert.equal(pendingRows(stores), 0);
    await assert.rejects(stores.bus.publish(TOPICS.generationRequested, "j", { jobId: "j" }), /closed/);
  });

  it("when the process dies (SIGKILL) in the middle of a handler, then a new process delivers the event again", async () => {
    const dir = freshDir();
    const script = join(dir, "crashing-consumer.mts");
    const storesModule = pathToFileURL(join(REPO, "src/adapters/sqlite/sqlite-stores.ts")).href;
    writeFileSync(
      script,
      `import { openSqliteStores } from ${JSON.stringify(storesModule)};
const stores = await openSqliteStores({ dataDir: process.argv[2], synchronous: "full", defaultPrices: new Map() });
await stores.bus.subscribe("generation.requested", "workers", async () => {
  process.stdout.write("handling\\n");
  await new Promise(() => {}); // never finishes: the process is killed here
});
await stores.bus.publish("generation.requested", "j9", { jobId: "j9" });
`,
    );
    const child = spawn(process.execPath, ["--import", "tsx", script, dir], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<void>((r) => child.on("exit", () => r()));
    try {
      await eventually(() => output.includes("handling") || child.exitCode !== null, Boolean, { what: "the child to handle the event", timeoutMs: 15_000 });
      assert.ok(output.includes("handling"), `child output: ${output}`);
    } finally {
      child.kill("SIGKILL");
      await exited;
    }

    const stores = await open(dir);
    const r = recorder<{ jobId: string }>();
    await stores.bus.subscribe(TOPICS.generationRequested, "workers", r.handler);
    await eventually(() => r.seen.length === 1, Boolean, { what: "redelivery after the crash", timeoutMs: 5_000 });
    assert.deepEqual(r.seen[0]!.event, { jobId: "j9" });
  });
});
