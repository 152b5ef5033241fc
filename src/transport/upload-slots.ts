/** Gives a taken slot back; calling it more than once gives it back once. */
export type ReleaseSlot = () => void;

/**
 * How many large uploads this process reads at once, one counter shared by
 * both ports (the gateway and the core): a body of hundreds of MiB is held
 * while it is parsed, so a few at a time bound the memory uploads can take.
 * A call that finds every slot taken is refused (429 `too_many_uploads` with
 * Retry-After) instead of queued: a queue would hold the sockets anyway.
 */
export class UploadSlots {
  private taken = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`upload slots: capacity must be an integer ≥ 1 (got ${capacity})`);
  }

  /** Slots taken right now. */
  get inUse(): number {
    return this.taken;
  }

  /** A slot, or undefined when all are taken. */
  tryTake(): ReleaseSlot | undefined {
    if (this.taken >= this.capacity) return undefined;
    this.taken++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.taken--;
    };
  }
}

/**
 * Bytes of request bodies (RPC messages) being received at once per process,
 * every body counted, small ones too (MAX_BODY_MEMORY): many small bodies
 * held open by slow or stalled senders cannot add up beyond it. A body takes
 * its announced size (or, while its size is unknown, what has arrived so
 * far) and gives it back once it has been read whole or the call ended.
 */
export class BodyBudget {
  private used = 0;

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new Error(`body budget: capacity must be an integer ≥ 1 (got ${capacity})`);
  }

  /** Bytes taken right now. */
  get inUse(): number {
    return this.used;
  }

  /** Takes `bytes`, or answers undefined (nothing taken) when they do not fit. The release gives them back once. */
  tryTake(bytes: number): ReleaseSlot | undefined {
    if (bytes > this.capacity - this.used) return undefined;
    this.used += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used -= bytes;
    };
  }
}
