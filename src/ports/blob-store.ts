export interface StoredBlob {
  readonly contentType: string;
  readonly size: number;
  readonly chunks: AsyncIterable<Uint8Array>;
}

/** A blob written in pieces: nothing is visible under its key until `commit`. */
export interface BlobWriter {
  /** Resolves when the store can take more (backpressure). */
  append(bytes: Uint8Array): Promise<void>;
  commit(): Promise<void>;
  /** Drops what was written; safe after commit (then a no-op) and twice. */
  abort(): Promise<void>;
}

/** Inputs and outputs by key. */
export interface BlobStore {
  put(key: string, bytes: Uint8Array, contentType: string): Promise<void>;
  /** Writes a blob without holding it in memory. */
  write(key: string, contentType: string): BlobWriter;
  /** Gives a blob a new key (a staged upload becoming a job's input); false when there is none under `from`. */
  move(from: string, to: string): Promise<boolean>;
  open(key: string): Promise<StoredBlob | undefined>;
  read(key: string): Promise<{ bytes: Uint8Array; contentType: string } | undefined>;
  delete(key: string): Promise<void>;
  /** Retention: removes blobs written before `before`; returns how many. */
  purgeOlderThan(before: Date): Promise<number>;
}
