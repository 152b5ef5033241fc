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

  /**
   * A hold for a body whose size is not known (chunked): it takes bytes as
   * they arrive, one `take` per piece, and gives all of them back at once.
   */
  open(): BodyHold {
    let held = 0;
    let released = false;
    return {
      take: (bytes) => {
        if (released) return true;
        if (bytes > this.capacity - this.used) return false;
        this.used += bytes;
        held += bytes;
        return true;
      },
      release: () => {
        if (released) return;
        released = true;
        this.used -= held;
        held = 0;
      },
    };
  }
}

/** What a body of unknown size holds of a BodyBudget. */
export interface BodyHold {
  /** Takes `bytes` more; false (nothing taken) when they do not fit. Once released it takes nothing and answers true: its body is over. */
  take(bytes: number): boolean;
  /** Gives back everything taken; calling it more than once gives it back once. */
  release(): void;
}
