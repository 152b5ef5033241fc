import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DiskBlobStore } from "../../src/adapters/disk/disk-blob-store.js";

/** Every file under `root`, relative, sorted (to see that nothing is left behind). */
function filesUnder(root: string): string[] {
  return (readdirSync(root, { recursive: true, withFileTypes: true }) as import("node:fs").Dirent[])
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(root.length + 1))
    .sort();
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
});
