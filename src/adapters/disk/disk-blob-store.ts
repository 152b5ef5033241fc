import { createReadStream } from "node:fs";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join, resolve, sep } from "node:path";
import { randomUUID } from "node:crypto";
import type { BlobStore, StoredBlob } from "../../ports/blob-store.js";

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

  /** Keys come from the service, but a key must never escape the root all the same. */
  private pathOf(key: string): string {
    const path = resolve(join(this.root, key));
    if (!path.startsWith(this.root + sep)) throw new Error(`blob key escapes the store: ${key}`);
    return path;
  }
}
