// backends: embedded
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DiskBlobStore } from "../../src/adapters/disk/disk-blob-store.js";

const directories: string[] = [];
after(() => {
  for (const dir of directories) rmSync(dir, { recursive: true, force: true });
});

/** Sets a file's (or directory's) modification time. */
const age = (path: string, when: Date) => utimesSync(path, when, when);

describe("DiskBlobStore retention next to the SQLite store", () => {
  it("when blobs older than the cutoff are purged, then they go with their sidecars and emptied folders, and newer ones stay", async () => {
    const root = mkdtempSync(join(tmpdir(), "blob-retention-"));
    directories.push(root);
    const blobs = new DiskBlobStore(root);
    const old = new Date("2025-01-01T00:00:00Z");
    const cutoff = new Date("2025-02-01T00:00:00Z");

    await blobs.put("outputs/job-old/output.png", new Uint8Array([1, 2, 3]), "image/png");
    await blobs.put("inputs/job-old/0", new Uint8Array([4]), "image/jpeg");
    await blobs.put("inputs/job-old/1", new Uint8Array([5]), "image/jpeg");
    await blobs.put("outputs/job-new/output.png", new Uint8Array([6]), "image/png");
    await blobs.put("outputs/job-mixed/old.png", new Uint8Array([7]), "image/png");
    await blobs.put("outputs/job-mixed/new.png", new Uint8Array([8]), "image/png");
    for (const key of ["outputs/job-old/output.png", "inputs/job-old/0", "inputs/job-old/1", "outputs/job-mixed/old.png"]) {
      age(join(root, key), old);
      age(join(root, `${key}.type`), old);
    }
    // Leftovers of a write that never finished, and an orphaned sidecar: removed when old, not counted.
    writeFileSync(join(root, "outputs/job-mixed/new.png.1234.tmp"), "partial");
    age(join(root, "outputs/job-mixed/new.png.1234.tmp"), old);
    mkdirSync(join(root, "outputs/job-orphan"), { recursive: true });
    writeFileSync(join(root, "outputs/job-orphan/gone.png.type"), "image/png");
    age(join(root, "outputs/job-orphan/gone.png.type"), old);
    // An empty folder created just now (a put under way) is left alone.
    mkdirSync(join(root, "outputs/job-starting"));

    assert.equal(await blobs.purgeOlderThan(cutoff), 4);
    assert.equal(await blobs.read("outputs/job-old/output.png"), undefined);
    assert.equal(await blobs.read("inputs/job-old/0"), undefined);
    assert.equal(await blobs.read("outputs/job-mixed/old.png"), undefined);
    assert.deepEqual((await blobs.read("outputs/job-new/output.png"))?.contentType, "image/png");
    assert.deepEqual((await blobs.read("outputs/job-mixed/new.png"))?.bytes, Buffer.from([8]));
    assert.equal(existsSync(join(root, "outputs/job-old")), false);
    assert.equal(existsSync(join(root, "inputs")), false, "a folder emptied by the sweep goes, up the tree");
    assert.equal(existsSync(join(root, "outputs/job-orphan")), false);
    assert.equal(existsSync(join(root, "outputs/job-starting")), true);
    assert.deepEqual(readdirSync(join(root, "outputs/job-mixed")).sort(), ["new.png", "new.png.type"]);
    assert.equal(existsSync(root), true);

    assert.equal(await blobs.purgeOlderThan(cutoff), 0);
    assert.equal(await new DiskBlobStore(join(root, "never-created")).purgeOlderThan(cutoff), 0);
  });
});
