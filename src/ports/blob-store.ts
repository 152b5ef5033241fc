export interface StoredBlob {
  readonly contentType: string;
  readonly size: number;
  readonly chunks: AsyncIterable<Uint8Array>;
}

/** Inputs and outputs by key. */
export interface BlobStore {
  put(key: string, bytes: Uint8Array, contentType: string): Promise<void>;
  open(key: string): Promise<StoredBlob | undefined>;
  read(key: string): Promise<{ bytes: Uint8Array; contentType: string } | undefined>;
  delete(key: string): Promise<void>;
  /** Retention: removes blobs written before `before`; returns how many. */
  purgeOlderThan(before: Date): Promise<number>;
}
