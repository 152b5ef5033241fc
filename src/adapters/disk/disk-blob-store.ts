import { createReadStream, createWriteStream } from "node:fs";
import { once } from "node:events";
import { mkdir, readdir, readFile, rename, rm, rmdir, stat, writeFile } from "node:fs/promises";
import { dirname, join, resolve, sep } from "node:path";
import { randomUUID } from "node:crypto";
import type { BlobStore, BlobWriter, StoredBlob } from "../../ports/blob-store.js";

/**
 * Blobs as files under one root, with the content type in a sidecar file.
 * Writes go to a temporary name and are renamed, so a reader never sees half a file.
 */
export class DiskBlobStore implements BlobStore {
  private readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  async put(key: string, bytes: Uint8Array, contentType: string): Promise<void> {
    const path = this.pathOf(key);
    await mkdir(dirname(path), { recursive: true });
    const temporary = `${path}.${randomUUID()}.tmp`;
    await writeFile(temporary, bytes);
    await writeFile(`${path}.type`, contentType);
    await rename(temporary, path);
  }

  write(key: string, contentType: string): BlobWriter {
    const path = this.pathOf(key);
    const temporary = `${path}.${randomUUID()}.tmp`;
    let stream: ReturnType<typeof createWriteStream> | undefined;
    let failure: Error | undefined;
    let finished = false;
    const opened = async () => {
      if (!stream) {
        await mkdir(dirname(path), { recursive: true });
        stream = createWriteStream(temporary);
        stream.on("error", (error) => (failure = error));
      }
      if (failure) throw failure;
      return stream;
    };
    return {
      async append(bytes) {
        const out = await opened();
        if (!out.write(bytes)) await once(out, "drain");
        if (failure) throw failure;
      },
      async commit() {
        const out = await opened();
        out.end();
        await once(out, "close");
        if (failure) throw failure;
        await writeFile(`${path}.type`, contentType);
        await rename(temporary, path);
        finished = true;
      },
      async abort() {
        if (finished) return;
        finished = true;
        if (stream && !stream.closed) {
          stream.destroy();
          await once(stream, "close").catch(() => undefined);
        }
        await rm(temporary, { force: true });
      },
    };
  }

  async move(from: string, to: string): Promise<boolean> {
    const source = this.pathOf(from);
    const target = this.pathOf(to);
    await mkdir(dirname(target), { recursive: true });
    try {
      await rename(`${source}.type`, `${target}.type`);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw error;
    }
    await rename(source, target);
    return true;
  }

  async open(key: string): Promise<StoredBlob | undefined> {
    const path = this.pathOf(key);
    try {
      const [info, contentType] = await Promise.all([stat(path), readFile(`${path}.type`, "utf8")]);
      return { contentType, size: info.size, chunks: createReadStream(path, { highWaterMark: 1 << 20 }) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
  }

  async read(key: string): Promise<{ bytes: Uint8Array; contentType: string } | undefined> {
    const path = this.pathOf(key);
    try {
      const [bytes, contentType] = await Promise.all([readFile(path), readFile(`${path}.type`, "utf8")]);
      return { bytes, contentType };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    const path = this.pathOf(key);
    await Promise.all([rm(path, { force: true }), rm(`${path}.type`, { force: true })]);
  }

  /**
   * Retention: removes blobs (with their `.type` sidecars) last written before
   * `before`, and directories the sweep leaves empty; returns how many blobs.
   * Temporary files of writes that never finished, and sidecars left without
   * their blob, go too when as old (they are not counted).
   */
  async purgeOlderThan(before: Date): Promise<number> {
    return (await this.purgeDirectory(this.root, before.getTime(), true)).blobs;
  }

  /** `gone`: this directory was removed (it was old or the sweep emptied it, and nothing is in it now). */
  private async purgeDirectory(directory: string, before: number, isRoot: boolean): Promise<{ blobs: number; gone: boolean }> {
    // Taken before the sweep changes it: a directory created just now (a put under way) is never removed.
    const createdOld = isRoot ? false : ((await mtimeOf(directory)) ?? Infinity) < before;
    let entries;
    try {
      entries = await readdir(directory, { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return { blobs: 0, gone: false };
      throw error;
    }
    const names = new Set(entries.map((entry) => entry.name));
    let blobs = 0;
    let emptied = false;
    for (const entry of entries) {
      const path = join(directory, entry.name);
      if (entry.isDirectory()) {
        const child = await this.purgeDirectory(path, before, false);
        blobs += child.blobs;
        emptied ||= child.gone;
        continue;
      }
      if (!entry.isFile()) continue;
      const sidecar = entry.name.endsWith(".type");
      // A sidecar goes with its blob; only an orphaned one is looked at on its own.
      if (sidecar && names.has(entry.name.slice(0, -".type".length))) continue;
      const modified = await mtimeOf(path);
      if (modified === undefined || modified >= before) continue;
      await rm(path, { force: true });
      emptied = true;
      if (sidecar || entry.name.endsWith(".tmp")) continue; // a write that never finished, or an orphaned sidecar
      await rm(`${path}.type`, { force: true });
      blobs++;
    }
    if (isRoot || !(emptied || createdOld)) return { blobs, gone: false };
    // rmdir removes only an empty directory: one a concurrent put wrote into stays.
    const gone = await rmdir(directory).then(() => true, () => false);
    return { blobs, gone };
  }

  /** Keys come from the service, but a key must never escape the root all the same. */
  private pathOf(key: string): string {
    const path = resolve(join(this.root, key));
    if (!path.startsWith(this.root + sep)) throw new Error(`blob key escapes the store: ${key}`);
    return path;
  }
}

async function mtimeOf(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).mtimeMs;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}
