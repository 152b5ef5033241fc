// backends: embedded
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DiskBlobStore } from "../../src/adapters/disk/disk-blob-store.js";
import { eventually } from "../support/eventually.js";

/** Every file under `root`, relative, sorted (to see that nothing is left behind). */
function filesUnder(root: string): string[] {
  return (readdirSync(root, { recursive: true, withFileTypes: true }) as import("node:fs").Dirent[])
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(root.length + 1))
    .sort();
}

/**
 * No descriptor was left open: the process holds no more than before the
 * write. Not exactly as many: something else in the process (a test runner's
 * pipe, a logger's file) may close one meanwhile, which is no leak of ours.
 */
function noMoreDescriptorsThan(before: number): void {
  const now = openFiles().length;
  assert.ok(now <= before, `as many descriptors open as before the write, or fewer: ${now} > ${before}`);
}

/** Targets of this process's open file descriptors (Linux /proc/self/fd). */
function openFiles(): string[] {
  const targets: string[] = [];
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      targets.push(readlinkSync(`/proc/self/fd/${fd}`));
    } catch {
      // closed between the listing and the look (the listing's own descriptor, for one)
    }
  }
  return targets;
}

const filesOpenUnder = (root: string) => openFiles().filter((target) => target.startsWith(root));

/** How a promise ended, or "pending" when it has not within the deadline (a hang is a failure, not a stuck test). */
async function settledWithin<T>(promise: Promise<T>, timeoutMs = 5_000): Promise<{ state: "fulfilled" | "rejected" | "pending"; error?: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const pending = new Promise<{ state: "pending" }>((resolve) => (timer = setTimeout(() => resolve({ state: "pending" }), timeoutMs)));
  try {
    return await Promise.race([
      promise.then(() => ({ state: "fulfilled" as const }), (error: unknown) => ({ state: "rejected" as const, error })),
      pending,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

describe("DiskBlobStore: blobs written in pieces and moved", () => {
  const root = mkdtempSync(join(tmpdir(), "blob-writer-"));
  after(() => rmSync(root, { recursive: true, force: true }));
  const store = new DiskBlobStore(root);

  it("when a blob is written in pieces, then it is invisible until commit and then reads back whole", async () => {
    const writer = store.write("staging/a", "image/png");
    await writer.append(Buffer.from("hello "));
    await writer.append(Buffer.alloc(3 << 20, 7));
    assert.equal(await store.read("staging/a"), undefined);
    await writer.commit();
    const blob = await store.read("staging/a");
    assert.equal(blob?.contentType, "image/png");
    assert.equal(blob?.bytes.length, 6 + (3 << 20));
    assert.equal(Buffer.from(blob!.bytes.subarray(0, 6)).toString(), "hello ");
    await writer.abort(); // after commit: nothing happens
    assert.ok(await store.read("staging/a"));
  });

  it("when a write is aborted, then no file of it is left", async () => {
    const writer = store.write("staging/b", "image/png");
    await writer.append(Buffer.alloc(1024, 1));
    await writer.abort();
    await writer.abort();
    assert.equal(await store.read("staging/b"), undefined);
    assert.ok(!filesUnder(root).some((name) => name.startsWith("staging/b")), filesUnder(root).join(","));
  });

  it("when a blob is moved, then it is found under the new key only, with its type; a missing one reports false", async () => {
    await store.put("staging/c", Buffer.from("moved bytes"), "image/jpeg");
    assert.equal(await store.move("staging/c", "inputs/job-1/0"), true);
    assert.equal(await store.read("staging/c"), undefined);
    const moved = await store.read("inputs/job-1/0");
    assert.equal(moved?.contentType, "image/jpeg");
    assert.equal(Buffer.from(moved!.bytes).toString(), "moved bytes");
    assert.equal(await store.move("staging/c", "inputs/job-1/1"), false);
  });

  it("when a move fails half-way (the target key is a directory), then it rejects and the blob stays whole under its old key", async () => {
    await store.put("staging/m", Buffer.from("still here"), "image/png");
    await store.put("inputs/job-m/0/inner", Buffer.from("x"), "image/png"); // inputs/job-m/0 is a directory
    await assert.rejects(store.move("staging/m", "inputs/job-m/0"));
    const kept = await store.read("staging/m");
    assert.equal(kept?.contentType, "image/png", "the sidecar is back beside its blob");
    assert.equal(Buffer.from(kept!.bytes).toString(), "still here");
    assert.ok(!filesUnder(root).includes("inputs/job-m/0.type"), filesUnder(root).join(","));
  });
});

describe("DiskBlobStore writer: aborts and errors leave no file and no descriptor", () => {
  const root = mkdtempSync(join(tmpdir(), "blob-writer-abort-"));
  after(() => rmSync(root, { recursive: true, force: true }));
  const store = new DiskBlobStore(root);
  const leftovers = (prefix: string) => filesUnder(root).filter((name) => name.startsWith(prefix));

  it("when the write's signal is aborted mid-write, then the pending append settles, and no temporary file or open descriptor is left", async () => {
    const descriptorsBefore = openFiles().length;
    const controller = new AbortController();
    const writer = store.write("staging/signal", "image/png", { signal: controller.signal });
    await writer.append(Buffer.alloc(1024, 1));
    await eventually(() => filesOpenUnder(root).length === 1, Boolean, { what: "the temporary file to be open while it is written", timeoutMs: 5_000, intervalMs: 0 });
    const pending = writer.append(Buffer.alloc(8 << 20, 2));
    controller.abort();
    const outcome = await settledWithin(pending);
    assert.notEqual(outcome.state, "pending", "an append cut by the signal settles");
    await eventually(() => leftovers("staging/signal").length === 0, Boolean, { what: "the temporary file to be removed", timeoutMs: 5_000, intervalMs: 0 });
    await eventually(() => filesOpenUnder(root).length === 0, Boolean, { what: "the descriptor to be closed", timeoutMs: 5_000, intervalMs: 0 });
    noMoreDescriptorsThan(descriptorsBefore);
    await assert.rejects(writer.commit(), "an aborted write cannot be committed");
    assert.equal(await store.read("staging/signal"), undefined);
    await writer.abort(); // still safe
  });

  it("when the writer is aborted while an append waits for the stream to drain, then the append settles, and no temporary file or open descriptor is left", async () => {
    const descriptorsBefore = openFiles().length;
    let caughtWaiting = 0;
    // The drain must still be pending when abort comes: a 64 MiB write takes a while; try again if it was quicker.
    for (let attempt = 0; attempt < 20 && caughtWaiting === 0; attempt++) {
      const key = `staging/drain-${attempt}`;
      const writer = store.write(key, "image/png");
      let settled = false;
      const pending = writer.append(Buffer.alloc(64 << 20, 3)).finally(() => (settled = true));
      pending.catch(() => {});
      // The descriptor is open once the write was handed to the stream (and it answered "wait for drain").
      await eventually(() => settled || filesOpenUnder(root).some((target) => target.includes("drain-")), Boolean, { what: "the temporary file to be opened", timeoutMs: 5_000, intervalMs: 0 });
      if (!settled) caughtWaiting++;
      await writer.abort();
      const outcome = await settledWithin(pending);
      assert.notEqual(outcome.state, "pending", "an append waiting for drain settles when the writer is aborted");
      assert.deepEqual(leftovers(key), [], "no temporary file is left");
      assert.deepEqual(filesOpenUnder(root), [], "no descriptor is left open");
    }
    assert.ok(caughtWaiting > 0, "abort came while a drain was pending at least once");
    noMoreDescriptorsThan(descriptorsBefore);
  });

  it("when the writer is aborted while its commit is under way, then the commit rejects, nothing is visible and no file or descriptor is left", async () => {
    const writer = store.write("staging/racing", "image/png");
    await writer.append(Buffer.alloc(4 << 20, 4));
    const committing = writer.commit();
    await writer.abort();
    const outcome = await settledWithin(committing);
    assert.equal(outcome.state, "rejected", "the commit lost to the abort");
    assert.equal(await store.read("staging/racing"), undefined);
    assert.deepEqual(leftovers("staging/racing"), [], "no temporary file and no sidecar");
    assert.deepEqual(filesOpenUnder(root), []);
  });

  it("when the commit fails (the key is a directory), then it rejects, and no temporary file, sidecar or open descriptor is left", async () => {
    await store.put("staging/taken/inner", Buffer.from("x"), "image/png"); // staging/taken is a directory
    const descriptorsBefore = openFiles().length;
    const writer = store.write("staging/taken", "image/png");
    await writer.append(Buffer.alloc(1 << 20, 5));
    const outcome = await settledWithin(writer.commit());
    assert.equal(outcome.state, "rejected", "a failed rename fails the commit");
    assert.deepEqual(leftovers("staging/taken").filter((name) => name !== "staging/taken/inner" && name !== "staging/taken/inner.type"), []);
    assert.deepEqual(filesOpenUnder(root), []);
    noMoreDescriptorsThan(descriptorsBefore);
    await writer.abort(); // after a failed commit: nothing more to do
  });

  it("when the temporary file cannot be created, then append or commit rejects, and no file or descriptor is left", async () => {
    const writer = store.write(`staging/${"n".repeat(240)}`, "image/png"); // with ".<uuid>.tmp" the name is too long
    const outcome = await settledWithin(
      (async () => {
        await writer.append(Buffer.alloc(64 << 10, 6));
        await writer.commit();
      })(),
    );
    assert.equal(outcome.state, "rejected", String(outcome.error));
    assert.deepEqual(leftovers("staging/nnn"), []);
    assert.deepEqual(filesOpenUnder(root), []);
  });
});
