/**
 * Values computed lately, by key, at most `max` of them: when full it starts
 * over, and the keys in use fill it again at once. For memos on hot paths
 * (key hashes, signed links, date strings, credentials found valid), where
 * the working set is small and a miss only costs the computation again.
 */
export class RecentValues<K, V> {
  private readonly values = new Map<K, V>();

  constructor(private readonly max: number) {}

  get(key: K): V | undefined {
    return this.values.get(key);
  }

  /** Keeps `value` for `key` and returns it. */
  remember(key: K, value: V): V {
    if (this.values.size >= this.max) this.values.clear();
    this.values.set(key, value);
    return value;
  }
}
