/**
 * Waiting work of many accounts, taken round-robin between accounts and in
 * arrival order within one: an account with thousands of jobs waiting gets
 * one turn, then every other waiting account gets one, so a newcomer waits
 * for at most one job per busy account ahead of it, not for the whole backlog.
 * An item is waiting at most once (a repeated announcement is ignored).
 */
export class FairQueue {
  /** Accounts with waiting items, in turn order; Map iteration keeps insertion order. */
  private readonly byAccount = new Map<string, string[]>();
  private readonly waiting = new Set<string>();

  get size(): number {
    return this.waiting.size;
  }

  has(item: string): boolean {
    return this.waiting.has(item);
  }

  /** False when the item is already waiting. */
  push(account: string, item: string): boolean {
    if (this.waiting.has(item)) return false;
    this.waiting.add(item);
    const queue = this.byAccount.get(account);
    if (queue) queue.push(item);
    else this.byAccount.set(account, [item]);
    return true;
  }

  /** The next item: the oldest of the account whose turn it is; that account then goes to the back of the line. */
  shift(): string | undefined {
    for (const [account, queue] of this.byAccount) {
      this.byAccount.delete(account);
      const item = queue.shift()!;
      if (queue.length > 0) this.byAccount.set(account, queue);
      this.waiting.delete(item);
      return item;
    }
    return undefined;
  }

  /** Empties the queue, returning what was waiting (in turn order). */
  drain(): string[] {
    const items: string[] = [];
    for (let item = this.shift(); item !== undefined; item = this.shift()) items.push(item);
    return items;
  }
}
