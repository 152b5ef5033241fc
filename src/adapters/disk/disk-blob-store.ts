import { createReadStream, createWriteStream, type WriteStream } from "node:fs";
import { once } from "node:events";
import { mkdir, readdir, readFile, rename, rm, rmdir, stat, writeFile } from "node:fs/promises";
import { dirname, join, resolve, sep } from "node:path";
import { randomUUID } from "node:crypto";
import type { BlobStore, BlobWriteOptions, BlobWriter, StoredBlob } from "../../ports/blob-store.js";

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

  write(key: string, contentType: string, options: BlobWriteOptions = {}): BlobWriter {
    const path = this.pathOf(key);
    return new DiskBlobWriter(path, `${path}.${randomUUID()}.tmp`, contentType, options.signal);
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
    try {
      await rename(source, target);
    } catch (error) {
      // Half a move is no move: the sidecar goes back beside its blob, which stays readable under `from`.
      await rename(`${target}.type`, `${source}.type`).catch(() => undefined);
      throw error;
    }
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

/** What a write that was aborted (by `abort()` or its signal) rejects with. */
export class BlobWriteAbortedError extends Error {
  override readonly name = "AbortError";
  constructor() {
    super("the blob write was aborted");
  }
}

/**
 * One blob written in pieces to a temporary file beside its final name.
 * Whatever ends it other than a commit (abort(), the signal, an error of the
 * file or of the commit) tears it down once: every wait on the stream stops
 * (a pending drain included), the descriptor is closed, the temporary file
 * and a sidecar this write wrote are removed; the call that saw the end
 * settles only after that. Abort wins over a commit until the commit's final
 * rename has begun; from then on the commit decides. Either way abort()
 * resolves once the commit has settled and nothing of a failed one is left.
 */
class DiskBlobWriter implements BlobWriter {
  private stream?: WriteStream;
  private opening?: Promise<WriteStream>;
  private failure?: Error;
  private aborted = false;
  private committing?: Promise<void>;
  private committed = false;
  private teardown?: Promise<void>;
  /** Aborted when the writer ends other than by a commit: stops every wait on the stream. */
  private readonly halt = new AbortController();
  private readonly onSignal = () => void this.abort();

  constructor(
    private readonly path: string,
    private readonly temporary: string,
    private readonly contentType: string,
    private readonly signal: AbortSignal | undefined,
  ) {
    if (signal?.aborted) this.aborted = true;
    else signal?.addEventListener("abort", this.onSignal, { once: true });
  }

  async append(bytes: Uint8Array): Promise<void> {
    this.ensureWritable();
    try {
      const out = await this.open();
      this.ensureLive();
      // Raced with the end of the writer: an abort or an error never leaves a drain waited for in vain.
      if (!out.write(bytes)) await once(out, "drain", { signal: this.halt.signal });
      this.ensureLive();
    } catch (error) {
      await this.tearDown();
      throw this.reason(error);
    }
  }

  commit(): Promise<void> {
    try {
      this.ensureWritable();
    } catch (error) {
      return Promise.reject(error);
    }
    this.committing = this.finish();
    return this.committing;
  }

  async abort(): Promise<void> {
    this.aborted = true;
    this.halt.abort();
    // A commit under way settles first: committed (its rename had begun), or failed and cleaned up.
    await this.committing?.catch(() => undefined);
    if (this.committed) return;
    await this.tearDown();
  }

  private async finish(): Promise<void> {
    let sidecarWritten = false;
    try {
      const out = await this.open();
      this.ensureLive();
      out.end();
      await once(out, "close", { signal: this.halt.signal }); // every byte written, the descriptor closed
      this.ensureLive();
      sidecarWritten = true;
      await writeFile(`${this.path}.type`, this.contentType);
      this.ensureLive(); // the last moment an abort wins
      await rename(this.temporary, this.path);
      this.committed = true;
      this.signal?.removeEventListener("abort", this.onSignal);
    } catch (error) {
      await this.tearDown();
      if (sidecarWritten) await rm(`${this.path}.type`, { force: true });
      throw this.reason(error);
    }
  }

  /** Creates the temporary file at the first write; never once the writer has ended. */
  private open(): Promise<WriteStream> {
    this.opening ??= (async () => {
      await mkdir(dirname(this.path), { recursive: true });
      this.ensureLive(); // ended while the directory was made: no file is created
      const stream = createWriteStream(this.temporary);
      stream.on("error", (error) => {
        this.failure ??= error;
        // The stream closes its descriptor itself; the temporary file goes here, whoever is waiting.
        void this.tearDown();
      });
      this.stream = stream;
      return stream;
    })();
    return this.opening;
  }

  /** Once: stops the waits, closes the descriptor, removes the temporary file (a failed commit removes its sidecar). */
  private tearDown(): Promise<void> {
    this.teardown ??= (async () => {
      this.halt.abort();
      this.signal?.removeEventListener("abort", this.onSignal);
      await this.opening?.catch(() => undefined);
      const stream = this.stream;
      if (stream && !stream.closed) {
        const closed = new Promise<void>((resolve) => stream.once("close", () => resolve()));
        stream.destroy(); // a write under way finishes first; then the descriptor is closed
        await closed;
      }
      await rm(this.temporary, { force: true });
    })();
    return this.teardown;
  }

  private ensureWritable(): void {
    if (this.committing) throw new Error("the blob write is committed, or being committed");
    this.ensureLive();
  }

  private ensureLive(): void {
    if (this.failure) throw this.failure;
    if (this.aborted) throw new BlobWriteAbortedError();
  }

  /** What a call that saw the writer end rejects with: the file's error, the abort, or its own error. */
  private reason(error: unknown): unknown {
    if (this.failure) return this.failure;
    if (this.aborted) return new BlobWriteAbortedError();
    return error;
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
