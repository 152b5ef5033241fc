export interface StoredBlob {
  readonly contentType: string;
  readonly size: number;
  readonly chunks: AsyncIterable<Uint8Array>;
}

/**
 * A blob written in pieces: nothing is visible under its key until `commit`.
 * A write that ends otherwise (abort, its signal, an error) leaves nothing
 * behind, and every call under way settles (rejects) once that is done.
 */
export interface BlobWriter {
  /** Resolves when the store can take more (backpressure); rejects when the write was aborted or failed. */
  append(bytes: Uint8Array): Promise<void>;
  commit(): Promise<void>;
  /**
   * Drops what was written, also while an append or a commit is under way
   * (they reject); safe after commit (then a no-op) and twice. Resolves once
   * nothing of the write is left.
   */
  abort(): Promise<void>;
}

export interface BlobWriteOptions {
  /** Aborting it aborts the write, as `abort()` does. */
  readonly signal?: AbortSignal;
}

/** Inputs and outputs by key. */
export interface BlobStore {
  put(key: string, bytes: Uint8Array, contentType: string): Promise<void>;
  /** Writes a blob without holding it in memory. */
  write(key: string, contentType: string, options?: BlobWriteOptions): BlobWriter;
  /** Gives a blob a new key (a staged upload becoming a job's input); false when there is none under `from`. */
  move(from: string, to: string): Promise<boolean>;
  open(key: string): Promise<StoredBlob | undefined>;
  read(key: string): Promise<{ bytes: Uint8Array; contentType: string } | undefined>;
  delete(key: string): Promise<void>;
  /** Retention: removes blobs written before `before`; returns how many. */
  purgeOlderThan(before: Date): Promise<number>;
}
